// The vendored trained model (tiny-en in tests/data/models.tar.xz, tools/train_tiny/train.py): real
// English through the whole engine. Its training run wrote the torch reference
// (training_results.json): the held-out text's token ids (tests/data/heldout_en.txt), its
// perplexity in f32 at three windowings, and transformers' greedy continuations. Checked
// here: the tokenizer encodes the held-out text as the training tokenizer did; `strata
// perplexity` equals torch within 1e-4 (relative) at page sizes 1 and 16, chunked and batched,
// and as two pipeline stages; greedy text equals transformers'; a served chat completion
// answers in text and stops at EOS; stop strings cut real text.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/perplexity.h"
#include "runtime/stage_device.h"
#include "server_harness.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

using nlohmann::json;

const std::string kModel = "tiny-en";

std::string model_dir() {
  return test::fixture_dir(kModel);
}
std::string heldout_path() {
  return std::string(STRATA_TEST_DATA) + "/heldout_en.txt";
}

const json& training_results() {
  static const json results = [] {
    std::ifstream in(model_dir() + "/training_results.json");
    return json::parse(in);
  }();
  return results;
}

// The torch reference for one windowing of the held-out text.
const json& torch_score(int context_length, int stride) {
  for (const json& r : training_results()["heldout_en"])
    if (r["context_length"] == context_length && r["stride"] == stride) return r;
  throw std::runtime_error("no torch reference for this windowing");
}

// One thread: the scoring runs many small passes, where a second thread mostly waits at
// OpenMP barriers (10x slower on a loaded 2-core machine, measured).
json run_perplexity(const std::string& args) {
  std::string out, err;
  const int rc = test::run_strata("perplexity --json --threads 1 --model " + model_dir() +
                                      " --text-file " + heldout_path() + " " + args,
                                  &out, &err);
  EXPECT_EQ(rc, 0) << args << "\n" << err;
  return json::parse(out, nullptr, false);
}

void expect_matches_torch(const json& got, int context_length, int stride) {
  ASSERT_TRUE(got.is_object());
  const json& ref = torch_score(context_length, stride);
  EXPECT_EQ(got["tokens_scored"], ref["tokens_scored"]);
  const double nll = got["mean_nll"], ref_nll = ref["mean_nll"];
  const double ppl = got["perplexity"], ref_ppl = ref["perplexity"];
  EXPECT_LE(std::abs(nll - ref_nll) / ref_nll, 1e-4) << nll << " vs torch " << ref_nll;
  EXPECT_LE(std::abs(ppl - ref_ppl) / ref_ppl, 1e-4) << ppl << " vs torch " << ref_ppl;
}

TEST(TinyModel, TokenizerEncodesHeldOutTextAsTrainingDid) {
  std::ifstream in(heldout_path(), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const auto tokenizer = tok::Tokenizer::load(model_dir());
  EXPECT_EQ(tokenizer.encode(text.str(), true),
            training_results()["heldout_en_ids"].get<std::vector<int>>());
}

TEST(TinyModel, PerplexityEqualsTorchAtEachWindowing) {
  for (const auto& [ctx, stride] : {std::pair{256, 128}, {512, 512}, {64, 32}})
    expect_matches_torch(
        run_perplexity(fmt::format("--context-length {} --stride {}", ctx, stride)), ctx, stride);
}

TEST(TinyModel, PerplexityIsTheSameAtPageSizes1And16) {
  const json p1 = run_perplexity("--context-length 256 --stride 128 --page-size 1");
  const json p16 = run_perplexity("--context-length 256 --stride 128 --page-size 16");
  expect_matches_torch(p16, 256, 128);
  EXPECT_NEAR(p1["mean_nll"].get<double>(), p16["mean_nll"].get<double>(), 1e-5);
}

TEST(TinyModel, PerplexityIsTheSameChunkedAndBatched) {
  // Prompt pieces of 40 tokens (windows cross chunk boundaries), 3 windows per pass, then 1.
  expect_matches_torch(
      run_perplexity("--context-length 256 --stride 128 --chunked-prefill-size 40 --batch-size 3"),
      256, 128);
  expect_matches_torch(run_perplexity("--context-length 64 --stride 32 --batch-size 1"), 64, 32);
}

TEST(TinyModel, PerplexityIsTheSameAsTwoPipelineStages) {
  expect_matches_torch(run_perplexity("--context-length 256 --stride 128 --pp-size 2"), 256, 128);
}

// The GPU keeps weights, GEMM inputs and the KV cache in bf16 (f32 accumulation and residual
// stream), so its perplexity is compared within a bf16 tolerance: 2e-3 of the mean NLL.
// transformers in bf16 on the H200 came within 1e-5 of its f32 value (training_results.json,
// heldout_en_bf16_cuda); 2e-3 leaves room for strata's other rounding points (the bf16 KV
// cache), while a real bug (a wrong mask, position or window) moves the NLL by far more.
// Skips with a visible message where there is no GPU or no CUDA build.
TEST(TinyModel, PerplexityOnCudaWithinBf16Tolerance) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  const json got = run_perplexity("--context-length 256 --stride 128 --device cuda");
  ASSERT_TRUE(got.is_object());
  const json& ref = torch_score(256, 128);
  EXPECT_EQ(got["tokens_scored"], ref["tokens_scored"]);
  const double nll = got["mean_nll"], ref_nll = ref["mean_nll"];
  EXPECT_LE(std::abs(nll - ref_nll) / ref_nll, 2e-3) << nll << " vs torch f32 " << ref_nll;
}

// int8 weights (--quantization int8: every Linear, the embedding and the LM head in int8 with a
// scale per 64 columns, the inputs of each product quantized the same way) keep the
// perplexity within 1% of f32's (the bar; the torch f32 score, which strata's f32
// equals to 1e-7). The NLL must also move (by more than 1e-6): an unquantized run passing the
// first check proves nothing.
TEST(TinyModel, PerplexityWithInt8WeightsWithin1PercentOfF32) {
  const json got = run_perplexity("--context-length 256 --stride 128 --quantization int8");
  ASSERT_TRUE(got.is_object());
  const json& ref = torch_score(256, 128);
  EXPECT_EQ(got["tokens_scored"], ref["tokens_scored"]);
  const double ppl = got["perplexity"], ref_ppl = ref["perplexity"];
  const double nll = got["mean_nll"], ref_nll = ref["mean_nll"];
  std::printf("[ cpu int8 ] perplexity %.4f vs f32 %.4f (%+.3f%%), mean NLL %.6f vs %.6f\n", ppl,
              ref_ppl, 100 * (ppl - ref_ppl) / ref_ppl, nll, ref_nll);
  EXPECT_LE(std::abs(ppl - ref_ppl) / ref_ppl, 0.01) << ppl << " vs f32 " << ref_ppl;
  EXPECT_GT(std::abs(nll - ref_nll) / ref_nll, 1e-6) << "the weights were not quantized";
}

TEST(TinyModel, PerplexityFlagErrorsNameTheFix) {
  std::string out, err;
  const std::string base = "perplexity --model " + model_dir() + " --text-file ";
  EXPECT_EQ(
      test::run_strata(base + heldout_path() + " --context-length 64 --stride 65", &out, &err), 1);
  EXPECT_NE(err.find("--stride must be between 1 and --context-length 64"), std::string::npos)
      << err;
  EXPECT_EQ(test::run_strata(base + "/no/such/file.txt", &out, &err), 1);
  EXPECT_NE(err.find("cannot read --text-file /no/such/file.txt"), std::string::npos) << err;
  EXPECT_EQ(test::run_strata("perplexity --model " + model_dir(), &out, &err), 2);  // no file
}

// The runtime's scoring against the logits of a plain prefill, on a random-weight fixture of
// another shape: input_logprobs are the log-softmax at each position, batched and chunked.
TEST(TinyModel, InputLogprobsAreTheLogSoftmaxOfPrefillLogits) {
  RunnerOptions options = test::default_options(4, 4);
  options.threads = 1;  // many small passes: two threads only wait on each other on a busy CI
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), options);
  const std::vector<int> ids = test::synthetic_tokens(150, 7);
  const Tensor logits = test::prefill_all_logits(runner, ids);
  const int vocab = runner.config().vocab_size;
  double nll = 0;
  for (size_t t = 1; t < ids.size(); ++t) {
    const float* row = logits.row(static_cast<int64_t>(t - 1));
    double mx = row[0], sum = 0;
    for (int v = 0; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
    for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
    nll -= row[ids[t]] - mx - std::log(sum);
  }
  PerplexityOptions o;
  o.context_length = 150;
  o.stride = 150;
  o.chunked_prefill_size = 33;
  const PerplexityResult one = perplexity(runner, ids, o);
  EXPECT_EQ(one.tokens_scored, 149);
  EXPECT_NEAR(one.nll_sum, nll, 1e-6 * nll);
  // Windows of 60 every 20 tokens, 2 per pass: the same tokens, less context each.
  o.context_length = 60;
  o.stride = 20;
  o.batch_size = 2;
  const PerplexityResult strided = perplexity(runner, ids, o);
  EXPECT_EQ(strided.tokens_scored, 149);
  EXPECT_EQ(strided.windows, 6);  // [0, 60), [20, 80), ..., [100, 150)
}

// f32 weights, and int8 weights (--quantization int8): on this trained model the int8 rounding
// moves no greedy choice in these 40 tokens (the random-weight golden fixtures, whose top-2
// margins sit within int8's error, can compare few greedy steps: golden_suite.cpp).
TEST(TinyModel, GreedyTextEqualsTransformers) {
  for (const std::string weights : {"", " --quantization int8"})
    for (const std::string name : {"text", "text2"}) {
      const json& ref = training_results()["greedy_samples"][name];
      std::string out, err;
      ASSERT_EQ(test::run_strata("generate --json --threads 1 --model " + model_dir() +
                                     " --prompt '" + ref["prompt"].get<std::string>() +
                                     "' --max-new-tokens 40 --stop-at-eos" + weights,
                                 &out, &err),
                0)
          << err;
      const json got = json::parse(out);
      EXPECT_EQ(got["output_ids"], ref["ids"]) << weights;
      EXPECT_EQ(got["text"], ref["text"]) << weights;
    }
}

// `strata serve` as users start it (it takes the EOS ids from the model directory and the
// tokenizer), one server for both tests.
class TinyModelServed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve_ = new test::ServeProcess("--model " + model_dir() + " --threads 1");
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(serve_->stop(), 0) << serve_->log();
    delete serve_;
    serve_ = nullptr;
  }
  std::pair<int, json> post(const std::string& path, const json& body) {
    if (serve_->port() <= 0) return {0, serve_->log()};
    httplib::Client c = serve_->client();
    auto res = c.Post(path, body.dump(), "application/json");
    if (!res) return {0, "no answer"};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  static test::ServeProcess* serve_;
};
test::ServeProcess* TinyModelServed::serve_ = nullptr;

TEST_F(TinyModelServed, ChatCompletionAnswersInTextAndStopsAtEos) {
  // The chat the training script sampled from transformers (greedy); the model learned from
  // chat pairs of training verses to end its turn with <|endoftext|>.
  const json& ref = training_results()["greedy_samples"]["chat"];
  const std::string message = "In the beginning God created the heaven and the earth.";
  ASSERT_NE(ref["prompt"].get<std::string>().find(message), std::string::npos);
  const auto [status, body] =
      post("/v1/chat/completions",
           json{{"model", kModel},
                {"messages", json::array({{{"role", "user"}, {"content", message}}})},
                {"max_tokens", 64},
                {"temperature", 0}});
  ASSERT_EQ(status, 200) << body.dump();
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"]["content"], ref["text"]);
  EXPECT_LT(body["usage"]["completion_tokens"].get<int>(), 64);
}

TEST_F(TinyModelServed, StopStringsCutRealText) {
  // transformers' greedy continuation of "And God said" is " unto Moses, Speak unto the
  // children of Israel, ...".
  const std::string full = training_results()["greedy_samples"]["text"]["text"];
  for (const std::string stop : {",", " children", "Israel"}) {
    const auto [status, body] = post("/v1/completions", json{{"model", kModel},
                                                             {"prompt", "And God said"},
                                                             {"max_tokens", 40},
                                                             {"temperature", 0},
                                                             {"stop", json::array({stop})}});
    ASSERT_EQ(status, 200) << body.dump();
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop") << stop;
    EXPECT_EQ(choice["text"], full.substr(0, full.find(stop))) << stop;
  }
}

}  // namespace
}  // namespace strata
