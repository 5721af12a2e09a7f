#pragma once
// Transport: how the processes of one job (pipeline stages, one process each) hand data to
// each other. MPI carries it between CPU processes (mpi_transport.h); NCCL will sit under
// the same interface for GPUs. Messages between two processes arrive in the order they were
// sent. Every wait is bounded by the transport's timeout: a peer that died or hung becomes an
// Error naming it, never a process that waits forever.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Returns once `peer` has taken the tensor. Waiting for the hand-over is deliberate: MPI
  // moves a large message only while both sides are inside MPI calls, so a sender that went
  // back to computing would stall its receiver until the computation ended.
  virtual void send_tensor(int peer, const Tensor& tensor) = 0;
  virtual Tensor recv_tensor(int peer) = 0;

  // Queues `ids` for `peer` and returns at once. The pipeline's last stage posts sampled ids
  // back this way: if it waited for a stage that is itself waiting to hand a hidden state
  // forward, the stages would wait on each other in a cycle.
  virtual void post_ids(int peer, std::vector<int32_t> ids) = 0;
  virtual std::vector<int32_t> recv_ids(int peer) = 0;

  // Every process reaches this point.
  virtual void barrier() = 0;
  // Waits until everything posted has been delivered.
  virtual void flush() = 0;
  // Ends every process of the job with exit status `code` (after the caller printed why).
  [[noreturn]] virtual void abort(int code) = 0;

  // Seconds any single wait may take before it becomes an Error.
  virtual void set_timeout(double seconds) = 0;
  virtual double timeout() const = 0;
};

}  // namespace strata
