// Prompt logprobs over HTTP with the tiny Llama: /v1/completions' echo (the prompt's text
// opens the choice, its tokens open the logprobs) and SGLang's /generate logprob_start_len
// (meta_info.input_token_logprobs / input_top_logprobs), each compared with the log-softmax
// of a plain prefill of the same prompt, with chunked prefill and with a cached prefix (also
// a hybrid model's, resumed from a recurrent-state snapshot).
#include <gtest/gtest.h>

#include "runtime/sampler.h"
#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

using test::Harness;

constexpr double kTol = 1e-4;

// What the engine should give for prompt token p (p >= 1): the log-softmax of a plain
// whole-prompt prefill's logits at position p - 1, with the `top` most likely tokens.
std::vector<TokenLogprob> reference_prompt_logprobs(const std::vector<int>& prompt, int top,
                                                    const std::string& fixture = "llama",
                                                    const std::string& device = "cpu") {
  RunnerOptions o = test::harness_runner_options(4096, 4);
  o.device = device;
  ModelRunner runner(ModelConfig::load(test::fixture_dir(fixture)), o);
  const Tensor logits = test::prefill_all_logits(runner, prompt);
  const int vocab = runner.config().vocab_size;
  std::vector<TokenLogprob> out;
  for (size_t p = 1; p < prompt.size(); ++p)
    out.push_back(token_logprob(logits.row(static_cast<int64_t>(p - 1)), vocab, prompt[p], top));
  return out;
}

json generate_body(const std::vector<int>& prompt, int start, int top) {
  return {{"input_ids", prompt},
          {"return_logprob", true},
          {"logprob_start_len", start},
          {"top_logprobs_num", top},
          {"sampling_params", {{"max_new_tokens", 3}, {"temperature", 0}, {"ignore_eos", true}}}};
}

// meta_info's input_token_logprobs / input_top_logprobs of prompt tokens [start, end) against
// the reference (whose entry i is prompt token i + 1).
void expect_input_logprobs(const json& reply, const std::vector<int>& prompt, int start,
                           const std::vector<TokenLogprob>& ref, const std::string& what) {
  const json& meta = reply["meta_info"];
  const json& values = meta["input_token_logprobs"];
  const json& tops = meta["input_top_logprobs"];
  ASSERT_EQ(values.size(), prompt.size() - static_cast<size_t>(start)) << what << reply.dump();
  ASSERT_EQ(tops.size(), values.size()) << what;
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t p = static_cast<size_t>(start) + i;
    EXPECT_EQ(values[i][1], prompt[p]) << what << " token " << p;
    if (p == 0) {
      EXPECT_TRUE(values[i][0].is_null()) << what << ": nothing predicts the first token";
      EXPECT_TRUE(tops[i].is_null()) << what;
      continue;
    }
    const TokenLogprob& want = ref[p - 1];
    EXPECT_NEAR(values[i][0].get<double>(), want.logprob, kTol) << what << " token " << p;
    ASSERT_EQ(tops[i].size(), want.top.size()) << what << " token " << p;
    for (size_t j = 0; j < want.top.size(); ++j) {
      EXPECT_EQ(tops[i][j][1], want.top[j].first) << what << " token " << p << " top " << j;
      EXPECT_NEAR(tops[i][j][0].get<double>(), want.top[j].second, kTol) << what << " token " << p;
    }
  }
}

}  // namespace

TEST(ServerPromptLogprobs, GenerateInputLogprobsAreAPlainPrefillsChunkedOrCached) {
  const std::vector<int> prompt = test::synthetic_tokens(20, 3);
  const std::vector<TokenLogprob> ref = reference_prompt_logprobs(prompt, 3);
  Harness whole;
  SchedulerOptions small_chunks;
  small_chunks.chunked_prefill_size = 3;  // the prompt over seven passes
  Harness chunked(small_chunks);

  const auto [s1, plain] = whole.post("/generate", generate_body(prompt, 0, 3));
  ASSERT_EQ(s1, 200) << plain.dump();
  expect_input_logprobs(plain, prompt, 0, ref, "whole prefill");
  const auto [s2, pieces] = chunked.post("/generate", generate_body(prompt, 0, 3));
  ASSERT_EQ(s2, 200) << pieces.dump();
  expect_input_logprobs(pieces, prompt, 0, ref, "chunked prefill");
  EXPECT_EQ(pieces["output_ids"], plain["output_ids"]);

  // The prompt is cached now: a request for its logprobs from the start takes no hit, one
  // from position 10 reuses the 9 tokens before the first logits row it needs.
  const auto [s3, again] = whole.post("/generate", generate_body(prompt, 0, 3));
  ASSERT_EQ(s3, 200) << again.dump();
  EXPECT_EQ(again["meta_info"]["cached_tokens"], 0);
  expect_input_logprobs(again, prompt, 0, ref, "after the prompt was cached");
  const auto [s4, later] = whole.post("/generate", generate_body(prompt, 10, 3));
  ASSERT_EQ(s4, 200) << later.dump();
  EXPECT_EQ(later["meta_info"]["cached_tokens"], 9);
  expect_input_logprobs(later, prompt, 10, ref, "from position 10 over a cached prefix");
  EXPECT_EQ(later["output_ids"], plain["output_ids"]);
  const auto [s5, chunked_later] = chunked.post("/generate", generate_body(prompt, 10, 3));
  ASSERT_EQ(s5, 200) << chunked_later.dump();
  expect_input_logprobs(chunked_later, prompt, 10, ref, "chunked, cached prefix");

  // Without logprob_start_len (SGLang's default -1) only output logprobs come.
  json outputs_only = generate_body(prompt, 0, 0);
  outputs_only.erase("logprob_start_len");
  const auto [s6, none] = whole.post("/generate", outputs_only);
  ASSERT_EQ(s6, 200) << none.dump();
  EXPECT_FALSE(none["meta_info"].contains("input_token_logprobs")) << none.dump();
  EXPECT_EQ(none["meta_info"]["output_token_logprobs"].size(), 3u);

  for (const int bad : {20, -2}) {
    const auto [s, e] = whole.post("/generate", generate_body(prompt, bad, 0));
    EXPECT_EQ(s, 400) << bad;
    const std::string message = e["error"]["message"];
    EXPECT_NE(message.find("logprob_start_len"), std::string::npos) << message;
    EXPECT_NE(message.find("0..19"), std::string::npos) << message;
  }
}

// A hybrid model (attention + Mamba2) with state snapshots in the prefix cache every 16
// tokens and chunks of 8: the prompt's positions from the first one asked for are computed
// from the snapshot before it, and give the plain prefill's values.
TEST(ServerPromptLogprobs, HybridModelWithStateSnapshotsGivesThePlainPrefillsValues) {
  const std::vector<int> prompt = test::synthetic_tokens(50, 5);
  const std::vector<TokenLogprob> ref = reference_prompt_logprobs(prompt, 2, "nemotron_h");
  SchedulerOptions chunks;
  chunks.chunked_prefill_size = 8;
  Harness h("nemotron_h", test::hybrid_cache_options("extra_buffer", 1, 4, 16), chunks);
  const auto [s1, first] = h.post("/generate", generate_body(prompt, 0, 2));
  ASSERT_EQ(s1, 200) << first.dump();
  expect_input_logprobs(first, prompt, 0, ref, "hybrid, from the start");
  const auto [s2, later] = h.post("/generate", generate_body(prompt, 40, 2));
  ASSERT_EQ(s2, 200) << later.dump();
  EXPECT_EQ(later["meta_info"]["cached_tokens"], 32);  // the snapshot at or before 39
  expect_input_logprobs(later, prompt, 40, ref, "hybrid, from 40 over a cached prefix");
  EXPECT_EQ(later["output_ids"], first["output_ids"]);
}

// On the GPU: the sampled pass that also returns the prompt rows (ModelRunner::run_pass)
// gives a plain GPU prefill's values, the pass being the same one prefill of the prompt.
TEST(ServerPromptLogprobs, OnCudaTheyAreAPlainGpuPrefills) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  const std::vector<int> prompt = test::synthetic_tokens(20, 3);
  const std::vector<TokenLogprob> ref = reference_prompt_logprobs(prompt, 3, "llama", "cuda");
  RunnerOptions o = test::harness_runner_options(4096, 16);
  o.device = "cuda";
  Harness h("llama", o, SchedulerOptions{});
  const auto [s, reply] = h.post("/generate", generate_body(prompt, 0, 3));
  ASSERT_EQ(s, 200) << reply.dump();
  expect_input_logprobs(reply, prompt, 0, ref, "cuda");
}

TEST(ServerPromptLogprobs, CompletionsEchoOpensTheTextAndLogprobsWithThePrompt) {
  Harness h(SchedulerOptions{}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  const std::string prompt = "The quick brown fox";
  const std::vector<int> ids = h.codec()->encode(prompt, true);
  ASSERT_GE(ids.size(), 3u);
  const std::vector<TokenLogprob> ref = reference_prompt_logprobs(ids, 2);
  const json greedy = {
      {"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}};
  const auto [s0, plain] = h.post("/v1/completions", greedy);
  ASSERT_EQ(s0, 200) << plain.dump();
  const std::string completion = plain["choices"][0]["text"];

  json echo = greedy;
  echo["echo"] = true;
  const auto [s1, echoed] = h.post("/v1/completions", echo);
  ASSERT_EQ(s1, 200) << echoed.dump();
  EXPECT_EQ(echoed["choices"][0]["text"], prompt + completion);
  EXPECT_TRUE(echoed["choices"][0]["logprobs"].is_null());
  // A prompt of token ids echoes as their text.
  json by_ids = echo;
  by_ids["prompt"] = ids;
  const auto [s2, from_ids] = h.post("/v1/completions", by_ids);
  ASSERT_EQ(s2, 200) << from_ids.dump();
  EXPECT_EQ(from_ids["choices"][0]["text"], h.codec()->decode(ids, false) + completion);

  echo["logprobs"] = 2;
  const auto [s3, scored] = h.post("/v1/completions", echo);
  ASSERT_EQ(s3, 200) << scored.dump();
  const json& lp = scored["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size() + 4) << lp.dump();
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size() + 4);
  EXPECT_EQ(lp["tokens"][0], h.codec()->token_text(ids[0]));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t p = 1; p < ids.size(); ++p) {
    EXPECT_EQ(lp["tokens"][p], h.codec()->token_text(ids[p])) << p;
    EXPECT_NEAR(lp["token_logprobs"][p].get<double>(), ref[p - 1].logprob, kTol) << p;
    // Token names can coincide (bytes of one character): the most likely value is there.
    double best = -1e30;
    for (const auto& [name, v] : lp["top_logprobs"][p].items())
      best = std::max(best, v.get<double>());
    EXPECT_NEAR(best, ref[p - 1].top[0].second, kTol) << p;
  }
  // The output's logprobs follow, as without echo.
  json scored_plain = greedy;
  scored_plain["logprobs"] = 2;
  const auto [s4, unechoed] = h.post("/v1/completions", scored_plain);
  ASSERT_EQ(s4, 200);
  const json& out_lp = unechoed["choices"][0]["logprobs"]["token_logprobs"];
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(lp["token_logprobs"][ids.size() + i].get<double>(), out_lp[i].get<double>(), kTol);

  // Streamed: the prompt opens the first chunk; the chunks join to the whole answer.
  json streamed = echo;
  streamed["stream"] = true;
  bool done = false;
  std::string text;
  std::vector<json> values;
  for (const json& e : h.stream("/v1/completions", streamed, &done))
    for (const auto& c : e["choices"]) {
      text += c["text"].get<std::string>();
      for (const auto& v : c["logprobs"]["token_logprobs"]) values.push_back(v);
    }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, prompt + completion);
  ASSERT_EQ(values.size(), lp["token_logprobs"].size());
  EXPECT_TRUE(values[0].is_null());
  for (size_t i = 1; i < values.size(); ++i)
    EXPECT_NEAR(values[i].get<double>(), lp["token_logprobs"][i].get<double>(), kTol) << i;
}

}  // namespace strata
