#pragma once
// HostStagedCommunicator: a tensor-parallel group of GPU processes whose collectives travel
// through host memory: each device tensor is copied to pinned host memory, summed or gathered by
// the group's MPI communicator, and copied back, in order on the stage's compute stream.
//
// Why it exists: NCCL refuses two ranks of one communicator on the same GPU ("duplicate GPU"),
// so tensor-parallel ranks that share a GPU (a machine with fewer GPUs than processes, such as a
// test machine with one) cannot use NcclCommunicator; a build without NCCL cannot either. This
// one is real and exact (the same f32 sums as the CPU path's MPI), but slow: every collective
// waits for the stream, crosses PCIe twice and goes through MPI's shared memory. And because it
// waits on the host, it cannot be captured into a CUDA graph (capturable() is false: the stage
// runs its passes eagerly). dist/device_communicator.h decides when it is used.
#include <cuda_runtime_api.h>

#include "dist/mpi_transport.h"
#include "kernels/cuda/device_buffer.h"

namespace strata {

class HostStagedCommunicator : public Communicator {
 public:
  // `host`: the group's MPI communicator (MpiTransport::tensor_parallel_group, kept alive by
  // the caller); `gpu`: this rank's; waits for the GPU are bounded by `timeout_seconds`.
  HostStagedCommunicator(MpiCommunicator& host, int gpu, double timeout_seconds);
  ~HostStagedCommunicator() override;
  HostStagedCommunicator(const HostStagedCommunicator&) = delete;
  HostStagedCommunicator& operator=(const HostStagedCommunicator&) = delete;

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  void all_reduce_sum(Tensor& t) override;
  void all_gather_cols(const Tensor& part, Tensor& out) override;
  int64_t min_over_ranks(int64_t value) override { return host_.min_over_ranks(value); }
  void bind(Ops&, void* stream) override { stream_ = static_cast<cudaStream_t>(stream); }
  bool capturable() const override { return false; }

 private:
  // dst (host, contiguous [rows, cols]) = src (device, strided), then waits for it.
  void to_host(const Tensor& src, float* dst);
  // dst (device, strided) = src (host, contiguous), queued on the stream; the staging memory
  // is reused only after the next wait, which comes after this copy.
  void to_device(const float* src, const Tensor& dst);
  // Waits for everything queued on the stream, bounded by the timeout.
  void sync(const char* what);

  MpiCommunicator& host_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  cuda::PinnedBuffer part_, whole_;  // the rank's tensor, and the gathered one
};

}  // namespace strata
