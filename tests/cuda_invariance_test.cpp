// CUDA = CPU, and the CUDA path's own invariances, for every family --device cuda runs: the
// same model files (one definition per family) through the CUDA ops must give the CPU
// reference's logits within the bf16 tolerance (golden_dense_cuda_test.cpp explains it), and
// batching, paging and the prefix cache must not change what the GPU computes.
// Skips with a visible message where there is no GPU or no CUDA build.
#include <gtest/gtest.h>

#include <cmath>

#include "golden_suite.h"
#include "runtime/scheduler.h"
#include "runtime/scheduler_test_util.h"

namespace strata::test {

namespace {

constexpr double kBf16LogitTolerance = 0.06;  // of the logits' spread, as the CUDA golden test

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
    config_ = ModelConfig::load(fixture_dir(GetParam().fixture));
    ref_ = load_reference(GetParam().fixture);
  }
  std::unique_ptr<ModelRunner> runner(const std::string& device, bool radix = false) {
    RunnerOptions o = default_options(GetParam().page_size);
    o.device = device;
    o.radix_cache = radix;
    return std::make_unique<ModelRunner>(config_, o);
  }
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
    const double tol = kBf16LogitTolerance * spread(on_cpu[i].logits[0]);
    for (size_t s = 0; s < batched[i].logits.size(); ++s) {
      if (batched[i].output_ids[s] != on_cpu[i].output_ids[s]) break;  // a near tie diverged
      EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), single[0].logits[s].data(), vocab), tol)
          << "prompt " << i << " step " << s << ": batched vs single";
      EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), on_cpu[i].logits[s].data(), vocab), tol)
          << "prompt " << i << " step " << s << ": cuda vs cpu";
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
  const double tol = kBf16LogitTolerance * spread(plain_logits[0]);
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

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaInvariance,
                         testing::Values(GoldenCase{"llama", 1}, GoldenCase{"llama", 16},
                                         GoldenCase{"qwen3", 16}, GoldenCase{"mistral_swa", 1},
                                         GoldenCase{"deepseek_v2_lite", 1},
                                         GoldenCase{"deepseek_v2_lite", 16},
                                         GoldenCase{"deepseek_v3", 16}),
                         golden_case_name);

}  // namespace strata::test
