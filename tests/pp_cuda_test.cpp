// Pipeline parallelism on GPUs: `strata generate --device cuda --pp-size 2` runs two stage
// processes on two GPUs (one each, from --base-gpu-id) that hand hidden states and ids over
// through NCCL. For every dense fixture the CUDA backend runs, PP = 2 must give
//  - the greedy ids and logits of PP = 1 on one GPU with the same micro-batches (the pipeline
//    adds only the layer split and the hand-overs; the residual stream travels as f32, so
//    nothing is rounded on the way: the logits agree to float rounding at most),
//  - the same ids with the argmax taken on the last GPU as with logits copied back,
//  - the greedy ids of PP = 1 with all prompts in one batch, up to the first step whose margin
//    (top-1 minus top-2 logit) is within the bf16 tolerance of golden_dense_cuda_test.cpp
//    (a different batch changes cuBLAS's kernels and so bf16 rounding).
// A stage that dies, hangs, runs out of memory or faults in a kernel ends the job with one
// clear error in bounded time. These tests skip with a visible message without 2 GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pipeline_test_util.h"

namespace strata::test {

namespace {

constexpr double kBf16LogitTolerance = 0.06;  // share of the logits' std (golden_dense_cuda_test)

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return max_abs_diff(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

bool skip_without_gpus(int needed, std::string* why) {
  if (!cuda_available(why)) return true;
  const int n = cuda_device_count();
  if (n < needed) {
    *why = "needs " + std::to_string(needed) + " GPUs, this machine has " + std::to_string(n);
    return true;
  }
  return false;
}

class PipelineCuda : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (skip_without_gpus(2, &why)) GTEST_SKIP() << "GPU pipeline test skipped: " << why;
  }
};

}  // namespace

TEST_P(PipelineCuda, TwoGpusGiveTheIdsOfOne) {
  const std::string fixture = GetParam();
  const Reference ref = load_reference(fixture);
  const std::string prompts = write_prompts_file(pipeline_test_prompts(ref));
  const std::string common = "--model " + fixture_dir(fixture) +
                             " --device cuda --input-ids-file " + prompts + " --max-new-tokens 10";
  const Generation same_batches = run_generate(common + " --return-logits --micro-batches 2");
  const Generation staged = run_generate(common + " --return-logits --pp-size 2");
  const Generation staged_argmax = run_generate(common + " --pp-size 2");
  const Generation one_batch = run_generate(common + " --return-logits");
  std::filesystem::remove(prompts);
  ASSERT_EQ(same_batches.ids.size(), 5u);
  ASSERT_EQ(staged.ids.size(), 5u);
  ASSERT_EQ(staged_argmax.ids.size(), 5u);
  ASSERT_EQ(one_batch.ids.size(), 5u);

  double worst = 0;
  for (size_t p = 0; p < 5; ++p) {
    EXPECT_EQ(staged.ids[p], same_batches.ids[p]) << "prompt " << p;
    EXPECT_EQ(staged_argmax.ids[p], staged.ids[p]) << "prompt " << p << " (argmax on the GPU)";
    ASSERT_EQ(staged.logits[p].size(), same_batches.logits[p].size());
    for (size_t s = 0; s < staged.logits[p].size(); ++s) {
      const double d = max_diff(staged.logits[p][s], same_batches.logits[p][s]);
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-3) << "prompt " << p << " step " << s;
    }
  }
  std::printf("[ pp cuda  ] %s: PP=2 vs PP=1 same batches: max |logit diff| %.3g\n",
              fixture.c_str(), worst);

  int compared = 0;
  for (size_t p = 0; p < 5; ++p) {
    for (size_t s = 0; s < one_batch.ids[p].size(); ++s) {
      const auto& row = one_batch.logits[p][s];
      if (staged.ids[p][s] != one_batch.ids[p][s]) {
        EXPECT_LE(margin(row), 2 * kBf16LogitTolerance * row_std(row))
            << "prompt " << p << " step " << s << ": PP=2 chose " << staged.ids[p][s]
            << ", one batch on one GPU " << one_batch.ids[p][s] << " by a clear margin";
        break;  // after a near tie either continuation is right
      }
      ++compared;
    }
  }
  std::printf("[ pp cuda  ] %s: PP=2 vs PP=1 one batch: %d greedy steps equal\n", fixture.c_str(),
              compared);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineCuda,
                         testing::Values("llama", "llama3_rope", "llama_bf16", "mistral_swa",
                                         "qwen2", "qwen3", "gemma3", "gpt_oss"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Uneven partitions, chunked prefill and pages go through the same hand-overs.
TEST(PipelineCudaOptions, PartitionChunkingAndPagesKeepTheResult) {
  std::string why;
  if (skip_without_gpus(2, &why)) GTEST_SKIP() << "GPU pipeline test skipped: " << why;
  const Reference ref = load_reference("llama");
  const std::string prompts = write_prompts_file(pipeline_test_prompts(ref));
  const std::string common = "--model " + fixture_dir("llama") +
                             " --device cuda --return-logits --input-ids-file " + prompts +
                             " --max-new-tokens 6 --chunked-prefill-size 5 --page-size 16";
  const Generation same_batches = run_generate(common + " --micro-batches 2");
  for (const std::string partition : {"1,3", "3,1"}) {
    const Generation staged = run_generate(common + " --pp-layer-partition " + partition);
    ASSERT_EQ(staged.ids.size(), same_batches.ids.size()) << partition;
    for (size_t p = 0; p < staged.ids.size(); ++p) {
      EXPECT_EQ(staged.ids[p], same_batches.ids[p]) << partition << ", prompt " << p;
      for (size_t s = 0; s < staged.logits[p].size(); ++s)
        EXPECT_LE(max_diff(staged.logits[p][s], same_batches.logits[p][s]), 1e-3)
            << partition << ", prompt " << p << " step " << s;
    }
  }
  std::filesystem::remove(prompts);
}

namespace {

int run_cuda_llama(const std::string& args, std::string* err, double* seconds) {
  return run_generate_bounded(
      "--model " + fixture_dir("llama") + " --device cuda --max-new-tokens 4 " + args, err,
      seconds);
}

}  // namespace

// --base-gpu-id picks the GPU; asking for GPUs the machine lacks is one clear error before any
// stage starts (needs one GPU: without any, the missing device is the error).
TEST(PipelineCudaFlags, GpuSelectionAndClearErrors) {
  std::string why;
  if (skip_without_gpus(1, &why)) GTEST_SKIP() << "GPU test skipped: " << why;
  const int n = cuda_device_count();
  const std::string last = std::to_string(n - 1);
  std::string err;
  double seconds = 0;
  EXPECT_EQ(run_cuda_llama("--input-ids 1,2,3 --base-gpu-id " + last, &err, &seconds), 0) << err;
  EXPECT_EQ(run_cuda_llama("--input-ids 1,2,3 --base-gpu-id " + std::to_string(n), &err, &seconds),
            1);
  EXPECT_NE(err.find("--base-gpu-id " + std::to_string(n) + " is out of range"), std::string::npos)
      << err;
  EXPECT_EQ(run_cuda_llama("--input-ids 1,2,3 --pp-size 2 --base-gpu-id " + last, &err, &seconds),
            1);
  EXPECT_NE(err.find("need GPUs " + last + ".." + std::to_string(n) + ", but this machine has " +
                     std::to_string(n)),
            std::string::npos)
      << err;
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  EXPECT_EQ(run_cuda_llama("--input-ids 1,2,3 --pp-size 2", &err, &seconds), 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_NE(err.find("2 GPU processes from --base-gpu-id 0 need GPUs 0..1, but this machine has 1"),
            std::string::npos)
      << err;
}

// A stage that dies, hangs, runs out of GPU memory or faults in a kernel right after its first
// pass ends every stage: non-zero exit, an error naming the cause, well within the bound that
// --pp-timeout sets.
TEST(PipelineCudaFailures, FailingStageEndsTheJob) {
  std::string why;
  if (skip_without_gpus(2, &why)) GTEST_SKIP() << "GPU pipeline test skipped: " << why;
  expect_gpu_faults_end_the_job("--model " + fixture_dir("llama") +
                                    " --device cuda --max-new-tokens 4 --input-ids 1,2,3 "
                                    "--pp-size 2 --pp-timeout 10",
                                "pp cuda");
}

}  // namespace strata::test
