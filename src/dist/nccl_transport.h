#pragma once
// The NCCL transport: pipeline stages on GPUs, one process per GPU, hand their hidden states
// (device memory) and sampled ids to each other with NCCL point-to-point sends and receives.
// MPI stays the control plane: the NCCL unique ids travel over it at start-up, barriers and
// abort go through it (so the same launcher starts CPU and GPU stages).
//
// Each directed link between two stages (stage k -> k+1 for hidden states, last -> k for
// ids) is its own two-rank communicator with its own stream. NCCL runs the operations of one
// communicator in order, so with one communicator a stage's receive of micro-batch 1 could
// queue behind its send of micro-batch 0's ids and the stages would wait on each other in a
// cycle; one communicator per direction keeps every link's operations in the order both ends
// issue them and lets transfers in the two directions overlap each other and the compute.
//
// Ordering against the stage's compute stream (set_stream): a send copies the tensor into a
// staging slot on the compute stream, then the link's stream sends it; a receive lands in a
// staging slot and the compute stream copies it out after it arrived. So the caller's buffers
// are free for the next pass at once and the host never waits for a hand-over; it waits only
// for ids (recv_ids), polling with a deadline. The communicators are non-blocking: every wait
// polls ncclCommGetAsyncError against --pp-timeout, and abort() calls ncclCommAbort (which
// releases transfers stuck on a dead peer) before MPI_Abort ends the job.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "dist/mpi_transport.h"
#include "kernels/cuda/device_buffer.h"

namespace strata {

class NcclTransport : public Transport {
 public:
  // Makes `gpu` this process's device, creates the communicators of this process's links and
  // exchanges one message over each (so a peer that cannot connect fails here, at start-up).
  NcclTransport(MpiTransport& control, int gpu, double timeout_seconds);
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  // The stream the stage computes on (before the first hand-over).
  void set_stream(cudaStream_t compute) { compute_ = compute; }

  std::string name() const override { return "nccl"; }
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  Memory memory() const override { return Memory::Device; }
  void reserve(int64_t max_tensor_elements, int max_ids) override;
  void send_tensor(int peer, const TensorRef& tensor) override;
  void recv_tensor(int peer, const TensorRef& tensor) override;
  void post_ids(int peer, std::vector<int32_t> ids) override;
  std::vector<int32_t> recv_ids(int peer, int count) override;
  void barrier() override { control_.barrier(); }
  void flush() override;
  [[noreturn]] void abort(int code) override;
  void set_timeout(double seconds) override;
  double timeout() const override { return timeout_s_; }

 private:
  enum class Kind { Hidden, Ids };
  struct Slot {
    cuda::DeviceBuffer buffer;
    int32_t* host = nullptr;  // pinned: ids on their way to or from the host
    cudaEvent_t ready = nullptr, done = nullptr;
    bool used = false;
  };
  struct Link {
    Kind kind;
    bool sends;  // this process is the link's sender
    int peer;    // the other process (its rank in the job)
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    std::vector<Slot> slots;
    size_t next = 0;
    size_t capacity = 0;  // bytes each slot holds
    Slot& take() { return slots[next++ % slots.size()]; }
  };

  Link& link(Kind kind, bool sends, int peer);
  // Waits until the last call on `l`'s communicator has been queued (non-blocking
  // communicators may still be connecting); Error on failure or after the timeout.
  void settle(Link& l, ncclResult_t result, const char* what);
  // Waits for `event` (recorded on a link's stream or the compute stream), checking every
  // communicator for errors meanwhile; Error after the timeout naming `l`'s peer.
  void wait(cudaEvent_t event, const Link& l, const char* what);
  void check_communicators() const;
  // Finalizes (graceful) or aborts every communicator, then frees the links.
  void destroy_links(bool graceful);

  MpiTransport& control_;
  int gpu_;
  double timeout_s_;
  cudaStream_t compute_ = nullptr;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace strata
