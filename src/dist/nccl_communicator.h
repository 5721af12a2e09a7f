#pragma once
// NcclCommunicator: the tensor-parallel group of a stage on GPUs of its own, one process per
// GPU: all-reduces and all-gathers of device tensors as NCCL collectives on the stage's
// compute stream (bind()), so they are ordered with the layers' kernels, never wait on the
// host, and are captured into the stage's CUDA graphs with the rest of a decode pass.
//
// Bootstrapped like NcclTransport: tensor-parallel rank 0 makes the unique id and broadcasts it
// over the group's MPI communicator. The communicator is non-blocking (ncclConfig_t.blocking =
// 0): a call that NCCL leaves in progress is polled against the job's timeout, and an error
// NCCL reports becomes an Error. Work stuck on a peer that hangs is bounded where the stage
// waits for its GPU (RunnerOptions::device_wait_timeout_s); abort_collectives() (ncclCommAbort)
// releases it before the job ends.
//
// Time (seconds()): the GPU time between CUDA events recorded around each collective queued
// eagerly; collectives captured into a graph are counted in untimed_calls() instead (their
// replays run without the host).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <deque>

#include "dist/mpi_transport.h"

namespace strata {

class NcclCommunicator : public Communicator {
 public:
  // Makes `gpu` this process's device and joins the group's NCCL communicator; every rank of
  // `host`'s group calls it. `host` stays the control plane (min_over_ranks).
  NcclCommunicator(MpiCommunicator& host, int gpu, double timeout_seconds);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  void all_reduce_sum(Tensor& t) override;
  void all_gather_cols(const Tensor& part, Tensor& out) override;
  int64_t min_over_ranks(int64_t value) override { return host_.min_over_ranks(value); }
  void bind(Ops& ops, void* stream) override;
  void abort_collectives() override;
  double seconds() const override;

 private:
  struct Timing {
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  // Waits until NCCL has queued the last call (non-blocking communicators may return
  // ncclInProgress); Error on failure or after the timeout.
  void settle(ncclResult_t result, const char* what);
  // Events around one collective (none while the stream is being captured).
  Timing* begin_timing();
  void end_timing(Timing* t);
  // Adds the GPU time of the finished collectives to seconds_ (their events recycled).
  void harvest() const;

  MpiCommunicator& host_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
  Ops* ops_ = nullptr;
  cudaStream_t stream_ = nullptr;
  mutable std::deque<Timing> pending_;  // recorded, not yet harvested
  mutable std::vector<Timing> free_;    // events to reuse
};

}  // namespace strata
