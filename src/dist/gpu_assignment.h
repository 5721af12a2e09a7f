#pragma once
// One process per GPU: the stage processes on one machine take consecutive GPUs from
// --base-gpu-id, in the order of their rank on that machine. Pure functions of the counts, so
// that every check runs (and is tested) without a GPU.
#include <string>

namespace strata {

// Problems with running `processes` GPU processes on this machine from GPU `base_gpu_id` when
// it has `device_count` GPUs, in one sentence naming the flags to change; empty when it fits.
std::string gpu_assignment_problem(int base_gpu_id, int processes, int device_count);

// The GPU of the process with local rank `local_rank` of `local_size` (Error when they do not
// fit, from gpu_assignment_problem).
int gpu_for_process(int base_gpu_id, int local_rank, int local_size, int device_count);

}  // namespace strata
