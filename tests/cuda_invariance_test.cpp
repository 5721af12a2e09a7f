// CUDA = CPU, and the CUDA path's own invariances, for every family --device cuda runs: the
// same model files (one definition per family) through the CUDA ops must give the CPU
// reference's logits within the bf16 tolerance (golden_dense_cuda_test.cpp explains it), and
// batching, paging and the prefix cache must not change what the GPU computes.
// Skips with a visible message where there is no GPU or no CUDA build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "golden_suite.h"
#include "runtime/scheduler.h"
#include "runtime/scheduler_test_util.h"

namespace strata::test {

namespace {

double spread(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += double(x) * x;
  const double mean = sum / v.size();
  return std::sqrt(std::max(0.0, sq / v.size() - mean * mean));
}

class CudaInvariance : public testing::TestWithParam<GoldenCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
    config_ = ModelConfig::load(golden_model_dir(GetParam().fixture));
    ref_ = load_reference(golden_reference_fixture(GetParam().fixture));
  }
  std::unique_ptr<ModelRunner> runner(const std::string& device, bool radix = false,
                                      const std::string& strategy = "auto") {
    RunnerOptions o = default_options(GetParam().page_size);
    o.device = device;
    o.radix_cache = radix;
    o.mamba_radix_cache_strategy = strategy;
    o.mamba_track_interval = 16;  // a multiple of both page sizes
    return std::make_unique<ModelRunner>(config_, o);
  }
  // Of the logits' spread, as the CUDA golden test (golden_suite.cpp).
  double share() const { return bf16_tolerance_share(GetParam().fixture); }
  ModelConfig config_;
  Reference ref_;
};

}  // namespace

// The four reference prompts as one batch on the GPU equal each alone on the GPU, and both
// equal the CPU reference's logits step by step (while the CPU's greedy choices are clear).
TEST_P(CudaInvariance, BatchedEqualsSingleAndCpu) {
  auto gpu = runner("cuda");
  auto cpu = runner("cpu");
  const auto& prompts = ref_.input_ids;
  const auto batched = greedy(*gpu, prompts, 6);
  const auto on_cpu = greedy(*cpu, prompts, 6);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto single = greedy(*gpu, {prompts[i]}, 6);
    const int vocab = config_.vocab_size;
    const double tol = share() * spread(on_cpu[i].logits[0]);
    // A prompt whose router sits within bf16 rounding of another expert choice is compared
    // with the CPU only before that flip (golden_suite.cpp); batched = single holds throughout.
    const int steps = static_cast<int>(batched[i].logits.size());
    int against_cpu = bf16_prefill_compared(GetParam().fixture, i)
                          ? bf16_greedy_steps_compared(GetParam().fixture, i)
                          : 0;
    if (against_cpu < 0) against_cpu = steps;
    // Step s's logits follow the same s tokens in both runs compared; after a near tie picks
    // differently, the inputs differ and the comparison stops.
    for (int s = 0; s < steps; ++s) {
      EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), single[0].logits[s].data(), vocab), tol)
          << "prompt " << i << " step " << s << ": batched vs single";
      if (s < against_cpu) {
        EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), on_cpu[i].logits[s].data(), vocab), tol)
            << "prompt " << i << " step " << s << ": cuda vs cpu";
      }
      if (batched[i].output_ids[s] != on_cpu[i].output_ids[s])
        against_cpu = std::min(against_cpu, s + 1);
      if (batched[i].output_ids[s] != single[0].output_ids[s]) break;
    }
  }
}

// A prompt that extends a finished one reuses its KV from the radix cache; the answer equals
// the uncached one.
TEST_P(CudaInvariance, PrefixCachedEqualsUncached) {
  const std::vector<int>& base = ref_.input_ids[2];  // 23 tokens
  std::vector<int> longer = base;
  longer.insert(longer.end(), ref_.input_ids[1].begin(), ref_.input_ids[1].end());
  std::vector<std::vector<float>> cached_logits, plain_logits;
  int cached_tokens = 0;
  for (bool radix : {true, false}) {
    auto gpu = runner("cuda", radix);
    SchedulerOptions so;
    so.disable_radix_cache = !radix;
    Scheduler s(*gpu, so);
    run_all(s, {base}, 4);
    auto done = run_all(s, {longer}, 4);
    (radix ? cached_logits : plain_logits) = done.at(0).logits;
    if (radix) cached_tokens = done.at(0).cached_tokens;
  }
  EXPECT_GT(cached_tokens, 0) << "the second prompt should hit the prefix cache";
  const double tol = share() * spread(plain_logits[0]);
  ASSERT_EQ(cached_logits.size(), plain_logits.size());
  for (size_t s = 0; s < plain_logits.size(); ++s)
    EXPECT_LE(max_abs_diff(cached_logits[s].data(), plain_logits[s].data(), config_.vocab_size),
              tol)
        << "step " << s;
}

// Sampling on the GPU: every request draws in the device's kernels (logit edits, the draw,
// logprobs); replayed on the host from the raw logits they return, the tokens and logprobs
// are the host reference's (ops/logit_edits.h, ops/sampling.h, ops/logprobs.h).
TEST_P(CudaInvariance, DeviceDrawsEqualTheHostReference) {
  auto gpu = runner("cuda");
  expect_draws_equal_host_reference(*gpu, ref_.input_ids[0]);
}

// A shared system prompt and a multi-turn conversation (the second turn extends the first's
// prompt and answer) served from the prefix cache equal the uncached answers. For hybrids, with
// each recurrent-state strategy, the snapshots copied between state slots on the GPU:
// extra_buffer's every 16 prompt tokens let the shared system prompt hit; no_buffer's (where
// prompts and answers end) serve the conversation. (Its uncached run found graph replays over
// a regrown staging buffer crashing the driver: buffer signatures now include sizes.)
TEST_P(CudaInvariance, SharedPromptAndConversationFromTheCacheEqualUncached) {
  const auto& p = ref_.input_ids;
  const std::vector<int>& system = p[2];
  std::vector<int> first = system, second = system;
  first.insert(first.end(), p[0].begin(), p[0].end());
  second.insert(second.end(), p[1].begin(), p[1].end());
  const std::vector<int>& turn1 = p[3];
  std::vector<int> turn2;
  // One workload: the shared-prompt pair, then the two turns; logits of the second of each.
  auto serve = [&](Scheduler& s, std::vector<std::vector<std::vector<float>>>& logits,
                   std::vector<int>& cached) {
    run_all(s, {first}, 4);
    auto b = run_all(s, {second}, 4);
    const auto t1 = run_all(s, {turn1}, 4);
    if (turn2.empty()) {  // from the uncached run's answer, so both runs serve the same turn
      turn2 = turn1;
      turn2.insert(turn2.end(), t1.at(0).ids.begin(), t1.at(0).ids.end());
      turn2.insert(turn2.end(), p[0].begin(), p[0].end());
    }
    auto t2 = run_all(s, {turn2}, 4);
    logits = {b.at(0).logits, t2.at(0).logits};
    cached = {b.at(0).cached_tokens, t2.at(0).cached_tokens};
  };
  std::vector<std::vector<std::vector<float>>> plain;
  std::vector<int> none;
  {
    auto gpu = runner("cuda");
    SchedulerOptions so;
    so.disable_radix_cache = true;
    Scheduler s(*gpu, so);
    serve(s, plain, none);
  }
  const bool hybrid = !config_.recurrent_layer_ids().empty();
  for (const std::string strategy : {"no_buffer", "extra_buffer"}) {
    if (!hybrid && strategy == "extra_buffer") break;  // the strategy is for recurrent state
    auto gpu = runner("cuda", true, strategy);
    Scheduler s(*gpu, SchedulerOptions{});
    std::vector<std::vector<std::vector<float>>> cached;
    std::vector<int> hits;
    serve(s, cached, hits);
    if (strategy == "extra_buffer" || !hybrid) {
      EXPECT_GT(hits[0], 0) << strategy << ": the shared system prompt should hit";
    }
    EXPECT_GT(hits[1], 0) << strategy << ": the second turn should hit";
    for (size_t w = 0; w < 2; ++w) {
      ASSERT_EQ(cached[w].size(), plain[w].size());
      const double tol = share() * spread(plain[w][0]);
      for (size_t step = 0; step < plain[w].size(); ++step)
        EXPECT_LE(max_abs_diff(cached[w][step].data(), plain[w][step].data(), config_.vocab_size),
                  tol)
            << strategy << (w == 0 ? ", shared system prompt" : ", second turn") << ", step "
            << step;
    }
  }
}

// Chunked prefill on the GPU at chunk sizes that split the fixtures' 16-token Mamba chunks
// (and land on them) equals one prefill: the state carried across passes.
TEST_P(CudaInvariance, ChunkedPrefillEqualsWhole) {
  auto gpu = runner("cuda");
  const int prompt = routing_stable_prompt(ref_);
  if (prompt < 0) GTEST_SKIP() << "every prompt of more than one token has a routing near-tie";
  const auto& ids = ref_.input_ids.at(prompt);
  const Tensor whole = prefill_all_logits(*gpu, ids);
  double tol = 0;
  {
    std::vector<float> row(whole.row(0), whole.row(0) + whole.cols());
    tol = share() * spread(row);
  }
  for (int chunk : {1, 7, 16, 21})
    EXPECT_LE(max_abs_diff(whole, prefill_all_logits(*gpu, ids, chunk)), tol) << "chunk " << chunk;
}

INSTANTIATE_TEST_SUITE_P(Hybrids, CudaInvariance,
                         testing::Values(GoldenCase{"nemotron_h", 1}, GoldenCase{"nemotron_h", 16},
                                         GoldenCase{"nemotron_h_moe", 16},
                                         GoldenCase{"nemotron_h_mamba_only", 1},
                                         GoldenCase{"bamba", 16}, GoldenCase{"falcon_h1", 1},
                                         GoldenCase{"lfm2", 1}, GoldenCase{"lfm2", 16},
                                         GoldenCase{"qwen3_next", 1}, GoldenCase{"qwen3_next", 16}),
                         golden_case_name);

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaInvariance,
                         testing::Values(GoldenCase{"llama", 1}, GoldenCase{"llama", 16},
                                         GoldenCase{"qwen3", 16}, GoldenCase{"mistral_swa", 1},
                                         GoldenCase{"deepseek_v2_lite", 1},
                                         GoldenCase{"deepseek_v2_lite", 16},
                                         GoldenCase{"deepseek_v3", 16}, GoldenCase{"gemma3", 1},
                                         GoldenCase{"gemma3", 16}, GoldenCase{"gpt_oss", 1},
                                         GoldenCase{"gpt_oss", 16}),
                         golden_case_name);

}  // namespace strata::test

namespace strata::test {

// The recurrent-state cache is sized before the KV pool and checked against the GPU's budget:
// a cache that cannot fit fails before anything is allocated, naming the numbers and the flags.
TEST(HybridCudaMemory, AStateCacheBeyondTheBudgetFailsUpFrontWithTheNumbers) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  RunnerOptions o = default_options(1);
  o.device = "cuda";
  o.max_mamba_cache_size = 1000000000;  // a billion slots: terabytes of state
  try {
    ModelRunner runner(ModelConfig::load(fixture_dir("nemotron_h")), o);
    FAIL() << "a state cache larger than the GPU must be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* part :
         {"recurrent-state cache of 1000000000 slots", "GiB", "--mem-fraction-static 0.88",
          "lower --max-mamba-cache-size (at most", "--mamba-ssm-dtype bfloat16"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " in: " << m;
  }
}

}  // namespace strata::test

namespace strata::test {

// The startup report describes the KV cache as the device's pool holds it: bf16 rows on cuda,
// not the model's f32 layouts (a GPU server once logged twice the KV bytes it had).
TEST(CudaStartupReport, TheKVCacheIsReportedInThePoolsDtype) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  RunnerOptions o = default_options(16);
  o.device = "cuda";
  ModelRunner runner(ModelConfig::load(fixture_dir("llama")), o);
  const auto lines = runner.startup_report(1);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("KV cache BF16"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("BF16"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("F32"), std::string::npos) << lines[1];
}

}  // namespace strata::test
