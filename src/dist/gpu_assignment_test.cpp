// GPU assignment needs no GPU: the checks are functions of the counts.
#include "dist/gpu_assignment.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {
namespace {

void expect_problem(int base, int processes, int devices, const std::string& needle) {
  const std::string p = gpu_assignment_problem(base, processes, devices);
  EXPECT_NE(p.find(needle), std::string::npos)
      << "base " << base << ", " << processes << " processes, " << devices << " GPUs: " << p;
}

TEST(GpuAssignment, ConsecutiveGpusFromTheBase) {
  EXPECT_EQ(gpu_assignment_problem(0, 2, 2), "");
  EXPECT_EQ(gpu_assignment_problem(1, 1, 2), "");
  EXPECT_EQ(gpu_assignment_problem(2, 4, 8), "");
  EXPECT_EQ(gpu_for_process(0, 1, 2, 2), 1);
  EXPECT_EQ(gpu_for_process(2, 0, 4, 8), 2);
  EXPECT_EQ(gpu_for_process(2, 3, 4, 8), 5);
}

TEST(GpuAssignment, OutOfRangeIsOneClearError) {
  expect_problem(-1, 1, 2, "--base-gpu-id must be at least 0, got -1");
  expect_problem(2, 1, 2, "--base-gpu-id 2 is out of range: this machine has 2 GPUs (GPUs 0..1)");
  expect_problem(1, 1, 1, "--base-gpu-id 1 is out of range: this machine has 1 GPU (GPU 0)");
  expect_problem(0, 2, 1,
                 "2 GPU processes from --base-gpu-id 0 need GPUs 0..1, but this machine has 1");
  expect_problem(1, 2, 2, "need GPUs 1..2, but this machine has 2 (GPUs 0..1)");
  expect_problem(1, 2, 2, "lower --pp-size or --base-gpu-id");
  expect_problem(0, 2, 0, "no visible GPU");
  EXPECT_THROW(gpu_for_process(1, 0, 2, 2), Error);
}

}  // namespace
}  // namespace strata
