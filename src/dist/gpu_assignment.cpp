#include "dist/gpu_assignment.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

namespace {

std::string gpu_ids(int count) {
  return count == 1 ? "GPU 0" : fmt::format("GPUs 0..{}", count - 1);
}

std::string gpus(int count) {
  return count == 1 ? "1 GPU" : fmt::format("{} GPUs", count);
}

}  // namespace

std::string gpu_assignment_problem(int base_gpu_id, int processes, int device_count, int tp_size) {
  if (base_gpu_id < 0) return fmt::format("--base-gpu-id must be at least 0, got {}", base_gpu_id);
  if (device_count <= 0)
    return "--device cuda: this machine has no visible GPU (check nvidia-smi and "
           "CUDA_VISIBLE_DEVICES), or use --device cpu";
  if (base_gpu_id >= device_count)
    return fmt::format(
        "--base-gpu-id {} is out of range: this machine has {} ({}); pick one of those",
        base_gpu_id, gpus(device_count), gpu_ids(device_count));
  if (base_gpu_id + processes <= device_count) return {};
  if (tp_size <= 1)
    return fmt::format(
        "{} GPU processes from --base-gpu-id {} need GPUs {}..{}, but this machine has {} "
        "({}); one process drives one GPU: lower --pp-size or --base-gpu-id",
        processes, base_gpu_id, base_gpu_id, base_gpu_id + processes - 1, device_count,
        gpu_ids(device_count));
  // The ranks of a stage may share its GPU; stages never share one (the pipeline's NCCL links
  // join two GPUs, and NCCL refuses two ranks on one).
  const int stages = (processes + tp_size - 1) / tp_size;
  if (processes % tp_size == 0 && base_gpu_id + stages <= device_count) return {};
  return fmt::format(
      "{} GPU processes ({} stages x --tp-size {}) from --base-gpu-id {} need {} GPUs (one per "
      "process) or {} (one per stage, shared by its tensor-parallel ranks), but this machine "
      "has {} ({}); stages never share a GPU: lower --pp-size or --base-gpu-id",
      processes, stages, tp_size, base_gpu_id, processes, stages, gpus(device_count),
      gpu_ids(device_count));
}

GpuPlacement gpu_placement(int base_gpu_id, int local_rank, int local_size, int device_count,
                           int tp_size) {
  const std::string problem =
      gpu_assignment_problem(base_gpu_id, local_size, device_count, tp_size);
  if (!problem.empty()) fail("{}", problem);
  STRATA_CHECK(local_rank >= 0 && local_rank < local_size, "local rank {} of {}", local_rank,
               local_size);
  if (base_gpu_id + local_size <= device_count) return {base_gpu_id + local_rank, 1};
  // A stage's ranks are consecutive on this machine (world rank = pp_rank * tp + tp_rank).
  return {base_gpu_id + local_rank / tp_size, tp_size};
}

TensorGroupKind tensor_group_kind(bool nccl_built, int processes_per_gpu) {
  return nccl_built && processes_per_gpu == 1 ? TensorGroupKind::Nccl : TensorGroupKind::HostStaged;
}

}  // namespace strata
