#include "dist/gpu_assignment.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

namespace {

std::string gpu_ids(int count) {
  return count == 1 ? "GPU 0" : fmt::format("GPUs 0..{}", count - 1);
}

}  // namespace

std::string gpu_assignment_problem(int base_gpu_id, int processes, int device_count) {
  if (base_gpu_id < 0) return fmt::format("--base-gpu-id must be at least 0, got {}", base_gpu_id);
  if (device_count <= 0)
    return "--device cuda: this machine has no visible GPU (check nvidia-smi and "
           "CUDA_VISIBLE_DEVICES), or use --device cpu";
  if (base_gpu_id >= device_count)
    return fmt::format(
        "--base-gpu-id {} is out of range: this machine has {} ({}); pick one of those",
        base_gpu_id, device_count == 1 ? "1 GPU" : fmt::format("{} GPUs", device_count),
        gpu_ids(device_count));
  if (base_gpu_id + processes > device_count)
    return fmt::format(
        "{} GPU processes from --base-gpu-id {} need GPUs {}..{}, but this machine has {} "
        "({}); one process drives one GPU: lower --pp-size or --base-gpu-id",
        processes, base_gpu_id, base_gpu_id, base_gpu_id + processes - 1, device_count,
        gpu_ids(device_count));
  return {};
}

int gpu_for_process(int base_gpu_id, int local_rank, int local_size, int device_count) {
  const std::string problem = gpu_assignment_problem(base_gpu_id, local_size, device_count);
  if (!problem.empty()) fail("{}", problem);
  STRATA_CHECK(local_rank >= 0 && local_rank < local_size, "local rank {} of {}", local_rank,
               local_size);
  return base_gpu_id + local_rank;
}

}  // namespace strata
