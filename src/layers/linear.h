#pragma once
// Shared building blocks every model family is made of: linear projections, RMSNorm,
// embeddings. Parameters live on the stage's device (ParamLoader); forward passes go through
// the ops interface, so the same layer runs on every device.
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/param_loader.h"
#include "ops/ops.h"

namespace strata {

class Linear {
 public:
  Linear() = default;
  // `prefix.weight` [out, in] and, with `bias`, `prefix.bias` [out].
  static Linear load(ParamLoader& w, const std::string& prefix, int64_t in, int64_t out, bool bias);
  // Several projections of the same input stacked along the output dimension, run as one
  // GEMM (q|k|v, gate|up). Output columns follow the order of `prefixes`.
  static Linear load_stacked(ParamLoader& w, const std::vector<std::string>& prefixes, int64_t in,
                             const std::vector<int64_t>& outs, bool bias);
  static Linear from_tensors(Tensor weight, Tensor bias = {});

  // Tensor parallelism (docs/tensor_parallel.md), over the loader's group. Column-parallel:
  // rows shards[i] of each stacked projection (q|k|v by heads, gate|up by intermediate
  // columns); the output is this rank's columns, used where they are (no collective).
  static Linear load_column_parallel(ParamLoader& w, const std::vector<std::string>& prefixes,
                                     int64_t in, const std::vector<int64_t>& outs,
                                     const std::vector<Shard>& shards, bool bias);
  // Row-parallel: this rank's 1/tp of the input columns (o_proj, down_proj); forward sums the
  // partial outputs over the group and adds the bias once.
  static Linear load_row_parallel(ParamLoader& w, const std::string& prefix, int64_t in,
                                  int64_t out, bool bias);
  // Vocab-parallel LM head: this rank's rows of `prefix.weight` [vocab, in], or (tied
  // embeddings) a view of them in the embedding table; forward gathers every rank's logit
  // columns, so the sampler sees the whole vocabulary.
  static Linear load_vocab_parallel(ParamLoader& w, const std::string& prefix, int64_t in,
                                    int64_t vocab);
  static Linear vocab_parallel_view(ParamLoader& w, const Tensor& table);

  Tensor forward(Ops& ops, const Tensor& x) const;  // [T, in] -> [T, output_width()] f32
  // y = x W^T + b, or y += x W^T + b with `accumulate` (a residual add for free).
  void forward_into(Ops& ops, const Tensor& x, Tensor& y, bool accumulate = false) const;
  int64_t in_features() const { return in_; }    // this rank's
  int64_t out_features() const { return out_; }  // this rank's
  // What forward writes: out_features, or the whole vocabulary of a vocab-parallel head.
  int64_t output_width() const { return gathered_out_ > 0 ? gathered_out_ : out_; }
  bool loaded() const { return !weight_.empty(); }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  // `local`, gathering its output columns over `group` (vocab-parallel).
  static Linear gathered(Linear local, Communicator& group, int64_t vocab);

  Tensor weight_, bias_;
  int64_t in_ = 0, out_ = 0;
  // Row-parallel: the group partial outputs are summed over; null for a local layer.
  Communicator* reduce_over_ = nullptr;
  // Vocab-parallel: the group logit columns are gathered from, and their total.
  Communicator* gather_over_ = nullptr;
  int64_t gathered_out_ = 0;
};

class RMSNorm {
 public:
  RMSNorm() = default;
  // `weight_offset` 1 for checkpoints that store (w - 1), as Gemma does. `width` may be a
  // divisor of the rows it normalizes (per-head norms).
  static RMSNorm load(ParamLoader& w, const std::string& name, int64_t width, float eps,
                      float weight_offset = 0.0f);
  // A new activation-dtype tensor: what a GEMM reads next.
  Tensor forward(Ops& ops, const Tensor& x) const;
  // out may be x (in place); out's dtype decides what is written.
  void forward_into(Ops& ops, const Tensor& x, Tensor& out) const;
  int64_t width() const { return weight_.numel(); }
  bool loaded() const { return !weight_.empty(); }

 private:
  Tensor weight_;
  float eps_ = 1e-6f, offset_ = 0.0f;
};

class Embedding {
 public:
  Embedding() = default;
  // Whole on every tensor-parallel rank: a lookup costs nothing to replicate.
  static Embedding load(ParamLoader& w, const std::string& name, int64_t vocab, int64_t width);
  Tensor forward(Ops& ops, const Tensor& ids) const;  // ids [T] int32 -> [T, width] f32
  const Tensor& table() const { return table_; }

 private:
  Tensor table_;
};

}  // namespace strata
