#pragma once
// Transport: how the processes of one job (pipeline stages, one process each) hand data to
// each other. MPI carries host tensors between CPU processes (mpi_transport.h); NCCL carries
// device tensors between GPU processes (nccl_transport.h), bootstrapped over MPI. Messages
// between two processes arrive in the order they were sent. Every wait is bounded by the
// transport's timeout: a peer that died or hung becomes an Error naming it, never a process
// that waits forever.
//
// Tensors live in the transport's memory(): the caller hands over views of its own buffers
// (TensorRef), so a GPU stage's hidden state goes from device memory to device memory without
// passing through the host. A host transport completes a hand-over before it returns; a device
// transport orders it on the stage's compute stream (see NcclTransport) and returns at once,
// which is what lets a GPU stage queue its next micro-batch while the last one travels.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor_ref.h"

namespace strata {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where the tensors given to send_tensor / recv_tensor must live.
  virtual Memory memory() const = 0;

  // The largest tensor (elements) and id list the job will hand over. A device transport
  // allocates its staging buffers here, before any hand-over is in flight (freeing device
  // memory later would wait for the transfers, and those may wait for this process).
  virtual void reserve(int64_t max_tensor_elements, int max_ids) = 0;

  // Hands `tensor` to `peer`. A host transport returns once `peer` has taken it (MPI moves a
  // large message only while both sides are inside MPI calls, so a sender that went back to
  // computing would stall its receiver). A device transport reads the tensor after the work
  // already queued on the compute stream and returns at once; the caller may overwrite it with
  // work queued afterwards.
  virtual void send_tensor(int peer, const TensorRef& tensor) = 0;
  // Receives the tensor `peer` sends into `tensor`, whose shape the caller expects (the
  // stages build identical batches); a host transport fails naming both shapes when they
  // differ. A device transport queues the receive: work queued on the compute stream after
  // the call sees the data.
  virtual void recv_tensor(int peer, const TensorRef& tensor) = 0;

  // Queues `ids` for `peer` and returns at once. The pipeline's last stage posts sampled ids
  // back this way: if it waited for a stage that is itself waiting to hand a hidden state
  // forward, the stages would wait on each other in a cycle.
  virtual void post_ids(int peer, std::vector<int32_t> ids) = 0;
  // The next `count` ids from `peer` (on the host), once they have arrived.
  virtual std::vector<int32_t> recv_ids(int peer, int count) = 0;

  // Every process reaches this point.
  virtual void barrier() = 0;
  // Waits until everything posted or sent has been delivered.
  virtual void flush() = 0;
  // Ends every process of the job with exit status `code` (after the caller printed why).
  [[noreturn]] virtual void abort(int code) = 0;

  // Seconds any single wait may take before it becomes an Error.
  virtual void set_timeout(double seconds) = 0;
  virtual double timeout() const = 0;
};

}  // namespace strata
