#pragma once
// The MPI transport (OpenMPI; host memory): one rank per process of the job started by mpirun
// (see launch.h). With tensor parallelism the job is a grid of pp stages x tp ranks, world
// rank = pp_rank * tp_size + tp_rank (docs/tensor_parallel.md): the transport then connects
// the stages of one tp_rank (its rank() is the stage), and the ranks of one stage form the
// tensor-parallel group. Waits are MPI_Test / MPI_Improbe polls against a deadline, so a dead or
// hung peer turns into an Error after `timeout` seconds instead of a blocked process; the
// caller then calls abort(), and mpirun ends every process of the job. GPU stages use it as
// their control plane (start-up, barriers, abort) under the NCCL transport.
#include <deque>
#include <memory>
#include <optional>

#include "dist/communicator.h"
#include "dist/transport.h"

namespace strata {

// A tensor-parallel group of CPU processes: MPI collectives over host f32 tensors on the
// group's communicator (MpiTransport::tensor_parallel_group), each wait bounded like the
// transport's.
class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(int comm_handle, double timeout_seconds);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(Tensor& t) override;
  void all_gather_cols(const Tensor& part, Tensor& out) override;
  int64_t min_over_ranks(int64_t value) override;
  // Every rank of the group gets rank `root`'s `bytes` (the same count on every rank):
  // bootstraps the group's NCCL communicator.
  void broadcast(int root, std::vector<char>& bytes);
  double timeout() const { return timeout_s_; }

 private:
  int comm_;  // MPI_Comm_c2f of the group's communicator (MpiTransport owns it)
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  std::vector<float> staging_;  // contiguous copies of strided tensors, gathered blocks
};

class MpiTransport : public Transport {
 public:
  // Joins the MPI job (MPI_Init_thread). One per process. `serialized`: threads other than
  // the one that made it call MPI too, one at a time (the server's engine thread, while the
  // main thread serves HTTP): MPI_THREAD_SERIALIZED, else FUNNELED. Destroy it on the thread
  // that made it (MPI_Finalize belongs to the thread that initialized MPI).
  // `tp_size`: ranks per stage (the job's size must be a multiple of it).
  explicit MpiTransport(double timeout_seconds, bool serialized = false, int tp_size = 1);
  ~MpiTransport() override;  // delivers what is posted, then MPI_Finalize
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Processes of this job on this machine (they share its cores, or its GPUs), and this
  // process's index among them.
  int local_size() const { return local_size_; }
  int local_rank() const { return local_rank_; }
  // This process's place in the tp x pp grid.
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }
  int world_size() const { return world_size_; }
  int world_rank() const { return world_rank_; }
  // The tensor-parallel group of this process's stage (valid while the transport lives).
  MpiCommunicator& tensor_parallel_group() { return *tensor_group_; }
  Memory memory() const override { return Memory::Host; }
  void reserve(int64_t, int) override {}  // messages are sized as they come

  void send_tensor(int peer, const TensorRef& tensor) override;
  void recv_tensor(int peer, const TensorRef& tensor) override;
  void post_ids(int peer, std::vector<int32_t> ids) override;
  std::vector<int32_t> recv_ids(int peer, int count) override;
  // Control messages (a distributed server's step inputs, heartbeats, stop, stage reports)
  // between any two processes of the job: `peer` is a world rank (every stage and every
  // tensor-parallel rank follows process 0's steps). `bytes` is queued for `peer` and this
  // returns at once; recv_message waits (bounded by the timeout) for the next one from
  // `peer`. `what` names the wait in a timeout's error.
  void post_message(int peer, std::string bytes);
  std::string recv_message(int peer, const char* what);
  // The next control message from `peer` if one has arrived; never waits for one.
  std::optional<std::string> try_recv_message(int peer);
  // Every stage of this pipeline gets stage root's `bytes` (the same count on every process).
  // Bootstraps other transports: NCCL's unique ids travel this way.
  void broadcast(int root, std::vector<char>& bytes);
  // Every process of the job gets world rank 0's `bytes` (the same count everywhere).
  void broadcast_to_job(std::vector<char>& bytes);
  void barrier() override;
  void flush() override;
  [[noreturn]] void abort(int code) override;
  void set_timeout(double seconds) override { timeout_s_ = seconds; }
  double timeout() const override { return timeout_s_; }

 private:
  struct Posted;
  // Polls `request` until it completes; Error after the timeout. `what` names the wait.
  void wait(void* request, int peer, const char* what);
  std::vector<char> receive_bytes(int peer, int tag, const char* what);
  // On communicator `comm` (a Fortran handle), where this process is `self`.
  std::vector<char> receive_bytes_on(int comm, int self, int peer, int tag, const char* what);
  void reap_posted();

  double timeout_s_;
  int rank_ = 0, size_ = 1, local_size_ = 1, local_rank_ = 0;
  int tp_rank_ = 0, tp_size_ = 1, world_size_ = 1, world_rank_ = 0;
  // MPI_Comm_c2f handles: the stages of this tp rank, the ranks of this stage, the whole job
  // (a duplicate of the world, for control messages only).
  int pipeline_comm_ = 0, tensor_comm_ = 0, control_comm_ = 0;
  std::unique_ptr<MpiCommunicator> tensor_group_;
  std::deque<std::unique_ptr<Posted>> posted_;  // ids not yet delivered (buffers kept alive)
};

}  // namespace strata
