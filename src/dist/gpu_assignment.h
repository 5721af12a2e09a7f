#pragma once
// One process per GPU: the stage processes on one machine take consecutive GPUs from
// --base-gpu-id, in the order of their rank on that machine. With tensor parallelism on a
// machine that has fewer GPUs than processes, the ranks of a stage may share the stage's GPU
// instead (their collectives then go through host memory: dist/device_communicator.h). Pure
// functions of the counts, so that every check runs (and is tested) without a GPU.
#include <string>

namespace strata {

// Problems with running `processes` GPU processes on this machine (stages x `tp_size`
// tensor-parallel ranks, a stage's ranks consecutive) from GPU `base_gpu_id` when it has
// `device_count` GPUs, in one sentence naming the flags to change; empty when they fit: one
// GPU per process, or (tp_size > 1) one per stage shared by its ranks.
std::string gpu_assignment_problem(int base_gpu_id, int processes, int device_count,
                                   int tp_size = 1);

// Where a GPU process runs: its GPU, and how many processes of this machine drive that GPU
// (1, or the stage's tp_size ranks sharing it).
struct GpuPlacement {
  int gpu = 0;
  int processes_per_gpu = 1;
};

// The placement of the process with local rank `local_rank` of `local_size` (Error when they
// do not fit, from gpu_assignment_problem). One GPU per process whenever there are enough.
GpuPlacement gpu_placement(int base_gpu_id, int local_rank, int local_size, int device_count,
                           int tp_size = 1);

// How a tensor-parallel group of GPU processes runs its collectives.
enum class TensorGroupKind { Nccl, HostStaged };
// NCCL when this build has it and every rank has a GPU of its own; host-staged MPI otherwise
// (NCCL refuses two ranks of one communicator on one GPU).
TensorGroupKind tensor_group_kind(bool nccl_built, int processes_per_gpu);

}  // namespace strata
