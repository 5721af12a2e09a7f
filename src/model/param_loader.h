#pragma once
// ParamLoader: the one loader of a stage's parameters. Layers ask it for their tensors by
// checkpoint name and shape; it reads them through the WeightSource (names, shapes and errors
// as the checkpoint has them) and puts them on the stage's device in that device's dtype:
// matrices in Ops::weight_dtype() (f32 on the CPU reference, bf16 on CUDA, bf16 or int8 on the
// CPU when asked), vectors (norm weights, biases, router biases) in f32. With --load-format
// dummy, matrices are made on the device itself (Ops::fill_dummy: the same values on every
// device), vectors by the dummy rule of DummyWeights (norms 1, biases 0).
#include <functional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/load_progress.h"
#include "model/shard.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace strata {

class ParamLoader {
 public:
  ParamLoader(WeightSource& source, Ops& ops, bool dummy, uint64_t seed)
      : source_(source), ops_(ops), dummy_(dummy), seed_(seed) {}
  Ops& ops() { return ops_; }
  WeightSource& source() { return source_; }
  bool has(const std::string& name) const { return source_.has(name); }
  // --load-format dummy: values are made, not read.
  bool dummy() const { return dummy_; }

  // The tensor-parallel group the loaded layers belong to (a single rank unless set): layers
  // ask it which shard is theirs and keep it for their collectives.
  void set_tensor_parallel(Communicator& group) { tensor_parallel_ = &group; }
  Communicator& tensor_parallel() { return *tensor_parallel_; }

  // `prefix.weight` [outs[i], in] of each prefix, stacked along rows (q|k|v, gate|up).
  Tensor matrix(const std::vector<std::string>& prefixes, int64_t in,
                const std::vector<int64_t>& outs);
  // The same with only rows shards[i] of each part: a column-parallel layer's share.
  Tensor matrix_rows(const std::vector<std::string>& prefixes, int64_t in,
                     const std::vector<int64_t>& outs, const std::vector<Shard>& shards);
  // Columns `shard` of each of `names` [rows, cols], stacked along rows: a row-parallel
  // layer's share (several: the experts' down projections).
  Tensor matrix_cols(const std::vector<std::string>& names, int64_t rows, int64_t cols,
                     const Shard& shard);
  // One matrix tensor by its full name (an embedding table, an expert's projection).
  Tensor matrix(const std::string& name, int64_t rows, int64_t cols);
  // One matrix kept in f32 on every device (MoE routers: the references compute them in f32,
  // and a bf16 router flips near-tied expert choices).
  Tensor matrix_f32(const std::string& name, int64_t rows, int64_t cols);
  // A matrix [rows, cols] that the checkpoint stores in another layout (gpt-oss's stacked,
  // interleaved experts): `name` is read on the host as `stored_shape` and `rearrange` makes
  // the [rows, cols] matrix of it. With dummy weights the matrix is made on the device at
  // once (its values are random in any layout), so no host copy of a large model is made.
  Tensor matrix_rearranged(const std::string& name, const std::vector<int64_t>& stored_shape,
                           int64_t rows, int64_t cols,
                           const std::function<Tensor(const Tensor&)>& rearrange);
  // `name` [n] as f32 on the device (entries `shard` of it).
  Tensor vector(const std::string& name, int64_t n, const Shard& shard = {});
  // `prefix.bias` of each prefix (entries shards[i] of each; empty: all), stacked; an empty
  // tensor when `present` is false.
  Tensor biases(const std::vector<std::string>& prefixes, const std::vector<int64_t>& outs,
                bool present, const std::vector<Shard>& shards = {});
  // The host f32 values of `name` (for parameters transformed at load: MLA's kv_b split).
  Tensor host(const std::string& name, const std::vector<int64_t>& shape) {
    return source_.load(name, shape);
  }
  // A host tensor made at load time, put on the device (in `dtype`).
  Tensor upload(const Tensor& host, DType dtype) {
    placed(host.numel(), storage_bytes(dtype, host.rows(), host.cols()));
    return ops_.upload(host, dtype);
  }
  Tensor upload_matrix(const Tensor& host) { return upload(host, ops_.weight_dtype()); }
  // Bytes of parameters put on the device so far.
  size_t bytes() const { return bytes_; }
  // Told of every tensor put on the device (the load's progress report).
  void set_progress(LoadProgress* progress) { progress_ = progress; }

 private:
  void placed(int64_t elements, size_t bytes) {
    bytes_ += bytes;
    if (progress_) progress_->add(elements, bytes);
  }

  WeightSource& source_;
  Ops& ops_;
  bool dummy_;
  uint64_t seed_;
  size_t bytes_ = 0;
  LoadProgress* progress_ = nullptr;
  SingleRankCommunicator single_rank_;
  Communicator* tensor_parallel_ = &single_rank_;
};

}  // namespace strata
