#pragma once
// Communicator: the collectives of one tensor-parallel group (docs/tensor_parallel.md). The
// ranks of a group hold different shards of the same layers and the same residual stream; a
// row-parallel layer sums its partial outputs over the group (all_reduce_sum), a vocab-parallel
// LM head joins its logit columns (all_gather_cols). Layers hold the group they were loaded for
// (ParamLoader::tensor_parallel), so model code calls neither directly and has no `tp > 1`
// branch: a group of one rank (SingleRankCommunicator) shards nothing.
//
// Tensors are the calling device's: MpiCommunicator (mpi_transport.h) works on host f32 tensors
// between CPU processes; on GPUs NcclCommunicator (nccl_communicator.h) works on device tensors
// in order on the stage's stream, and HostStagedCommunicator (staged_communicator.h) copies them
// through host memory into MPI where NCCL cannot run (ranks sharing a GPU).
// dist/device_communicator.h chooses between those two. Every collective is called by every
// rank of the group in the same order; a peer that died or hung becomes an Error after the
// job's timeout.
#include <cstdint>

#include "core/tensor.h"

namespace strata {

class Ops;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // t = the sum of every rank's t, on every rank (t [rows, cols], strided views allowed).
  virtual void all_reduce_sum(Tensor& t) = 0;
  // out [rows, C] = every rank's `part` side by side: rank r's part holds the columns
  // Shard{r, size()}.range(C) of out (model/shard.h: the last part may be narrower).
  virtual void all_gather_cols(const Tensor& part, Tensor& out) = 0;
  // The smallest of every rank's `value`, on every rank (host side; also a barrier). The ranks
  // size their caches with it, so that their schedulers admit alike.
  virtual int64_t min_over_ranks(int64_t value) = 0;

  // GPU groups: the stage's ops (workspace for staging copies inside a pass) and its compute
  // stream (a cudaStream_t), which every collective is ordered on. ModelRunner binds them
  // once its device exists, before any pass.
  virtual void bind(Ops&, void* /*stream*/) {}
  // Whether a collective may be captured into a CUDA graph and replayed (NCCL's can; one that
  // waits on the host in MPI cannot: the stage then runs its passes eagerly).
  virtual bool capturable() const { return true; }
  // Before the job ends on an error: releases collectives stuck on a dead peer (NCCL).
  virtual void abort_collectives() {}

  // Time spent in collectives so far, and how many were run (the benchmark's all-reduce share
  // of a decode step): host time for host collectives, GPU time for those queued on a stream.
  virtual double seconds() const { return seconds_; }
  int64_t calls() const { return calls_; }
  // Collectives captured into CUDA graphs: their replays run without the host, so neither
  // seconds() nor calls() counts them.
  int64_t untimed_calls() const { return untimed_calls_; }

 protected:
  double seconds_ = 0;
  int64_t calls_ = 0;
  int64_t untimed_calls_ = 0;
};

// The group of one rank (--tp-size 1): every collective is the identity.
class SingleRankCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(Tensor&) override {}
  void all_gather_cols(const Tensor& part, Tensor& out) override;
  int64_t min_over_ranks(int64_t value) override { return value; }
};

}  // namespace strata
