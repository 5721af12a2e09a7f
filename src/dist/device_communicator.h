#pragma once
// The tensor-parallel group of GPU processes: the one place that chooses how its collectives
// run (docs/tensor_parallel.md, "On GPUs").
#include <memory>

#include "dist/gpu_assignment.h"
#include "dist/mpi_transport.h"

namespace strata {

// The group of this process's stage (every rank of it calls this, after MpiTransport is made):
// NcclCommunicator when this build has NCCL and every rank of the group drives a GPU of its
// own; HostStagedCommunicator (through host memory and MPI, slower, and run without CUDA
// graphs) when ranks share a GPU, which NCCL refuses, or the build has no NCCL. The ranks agree
// on the choice (the least capable one's), so that a group never mixes the two.
std::unique_ptr<Communicator> make_gpu_tensor_group(MpiTransport& control,
                                                    const GpuPlacement& placement,
                                                    double timeout_seconds);

}  // namespace strata
