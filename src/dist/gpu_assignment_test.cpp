// GPU assignment needs no GPU: the checks are functions of the counts.
#include "dist/gpu_assignment.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {
namespace {

void expect_problem(int base, int processes, int devices, const std::string& needle,
                    int tp_size = 1) {
  const std::string p = gpu_assignment_problem(base, processes, devices, tp_size);
  EXPECT_NE(p.find(needle), std::string::npos)
      << "base " << base << ", " << processes << " processes, " << devices << " GPUs: " << p;
}

TEST(GpuAssignment, ConsecutiveGpusFromTheBase) {
  EXPECT_EQ(gpu_assignment_problem(0, 2, 2), "");
  EXPECT_EQ(gpu_assignment_problem(1, 1, 2), "");
  EXPECT_EQ(gpu_assignment_problem(2, 4, 8), "");
  EXPECT_EQ(gpu_placement(0, 1, 2, 2).gpu, 1);
  EXPECT_EQ(gpu_placement(2, 0, 4, 8).gpu, 2);
  EXPECT_EQ(gpu_placement(2, 3, 4, 8).gpu, 5);
  EXPECT_EQ(gpu_placement(2, 3, 4, 8).processes_per_gpu, 1);
}

TEST(GpuAssignment, TensorParallelRanksShareTheirStagesGpuOnlyWhenGpusRunShort) {
  // Enough GPUs: one each, even with tensor parallelism (NCCL).
  EXPECT_EQ(gpu_placement(0, 1, 2, 2, 2).gpu, 1);
  EXPECT_EQ(gpu_placement(0, 1, 2, 2, 2).processes_per_gpu, 1);
  // One GPU, TP 2: both ranks on GPU 0.
  EXPECT_EQ(gpu_assignment_problem(0, 2, 1, 2), "");
  EXPECT_EQ(gpu_placement(0, 1, 2, 1, 2).gpu, 0);
  EXPECT_EQ(gpu_placement(0, 1, 2, 1, 2).processes_per_gpu, 2);
  // TP 2 x PP 2 on two GPUs from GPU 0: stage 0's ranks on GPU 0, stage 1's on GPU 1.
  EXPECT_EQ(gpu_placement(0, 1, 4, 2, 2).gpu, 0);
  EXPECT_EQ(gpu_placement(0, 2, 4, 2, 2).gpu, 1);
  EXPECT_EQ(gpu_placement(0, 3, 4, 2, 2).processes_per_gpu, 2);
  // Stages never share a GPU.
  expect_problem(0, 4, 1,
                 "4 GPU processes (2 stages x --tp-size 2) from --base-gpu-id 0 need 4 GPUs (one "
                 "per process) or 2",
                 2);
  EXPECT_THROW(gpu_placement(1, 0, 2, 1, 2), Error);
}

TEST(GpuAssignment, NcclOnlyWithAGpuPerRank) {
  EXPECT_EQ(tensor_group_kind(true, 1), TensorGroupKind::Nccl);
  EXPECT_EQ(tensor_group_kind(true, 2), TensorGroupKind::HostStaged);
  EXPECT_EQ(tensor_group_kind(false, 1), TensorGroupKind::HostStaged);
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
  EXPECT_THROW(gpu_placement(1, 0, 2, 2), Error);
}

}  // namespace
}  // namespace strata
