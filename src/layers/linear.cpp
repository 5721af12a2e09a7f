#include "layers/linear.h"

#include "core/error.h"

namespace strata {

Linear Linear::load(ParamLoader& w, const std::string& prefix, int64_t in, int64_t out, bool bias) {
  return load_stacked(w, {prefix}, in, {out}, bias);
}

Linear Linear::load_stacked(ParamLoader& w, const std::vector<std::string>& prefixes, int64_t in,
                            const std::vector<int64_t>& outs, bool bias) {
  Linear l;
  l.in_ = in;
  for (int64_t o : outs) l.out_ += o;
  l.weight_ = w.matrix(prefixes, in, outs);
  l.bias_ = w.biases(prefixes, outs, bias);
  return l;
}

Linear Linear::load_column_parallel(ParamLoader& w, const std::vector<std::string>& prefixes,
                                    int64_t in, const std::vector<int64_t>& outs,
                                    const std::vector<Shard>& shards, bool bias) {
  Linear l;
  l.in_ = in;
  for (size_t i = 0; i < outs.size(); ++i) l.out_ += shards.at(i).size(outs[i]);
  l.weight_ = w.matrix_rows(prefixes, in, outs, shards);
  l.bias_ = w.biases(prefixes, outs, bias, shards);
  return l;
}

Linear Linear::load_row_parallel(ParamLoader& w, const std::string& prefix, int64_t in, int64_t out,
                                 bool bias) {
  Communicator& group = w.tensor_parallel();
  if (group.size() == 1) return load(w, prefix, in, out, bias);
  const Shard shard{group.rank(), group.size()};
  STRATA_CHECK(in % group.size() == 0, "{}: {} input columns over {} tensor-parallel ranks", prefix,
               in, group.size());
  Linear l;
  l.in_ = shard.size(in);
  l.out_ = out;
  l.weight_ = w.matrix_cols({prefix + ".weight"}, out, in, shard);
  // Every rank's partial sum would carry it: rank 0 alone adds the bias before the sum.
  if (group.rank() == 0) l.bias_ = w.biases({prefix}, {out}, bias);
  l.reduce_over_ = &group;
  return l;
}

Linear Linear::load_vocab_parallel(ParamLoader& w, const std::string& prefix, int64_t in,
                                   int64_t vocab) {
  Communicator& group = w.tensor_parallel();
  const Shard shard{group.rank(), group.size()};
  return gathered(from_tensors(w.matrix_rows({prefix}, in, {vocab}, {shard})), group, vocab);
}

Linear Linear::vocab_parallel_view(ParamLoader& w, const Tensor& table) {
  Communicator& group = w.tensor_parallel();
  const Shard shard{group.rank(), group.size()};
  const int64_t vocab = table.dim(0);
  if (shard.whole())
    return from_tensors(table);  // also a packed int8 table, which has no row slices
  return gathered(from_tensors(table.slice_rows(shard.begin(vocab), shard.size(vocab))), group,
                  vocab);
}

Linear Linear::gathered(Linear local, Communicator& group, int64_t vocab) {
  if (group.size() == 1) return local;
  local.gather_over_ = &group;
  local.gathered_out_ = vocab;
  return local;
}

Linear Linear::from_tensors(Tensor weight, Tensor bias) {
  Linear l;
  l.out_ = weight.dim(0);
  l.in_ = weight.dim(1);
  l.weight_ = std::move(weight);
  l.bias_ = std::move(bias);
  return l;
}

Tensor Linear::forward(Ops& ops, const Tensor& x) const {
  Tensor y = ops.empty({x.rows(), output_width()});
  forward_into(ops, x, y);
  return y;
}

void Linear::forward_into(Ops& ops, const Tensor& x, Tensor& y, bool accumulate) const {
  STRATA_CHECK(x.cols() == in_, "linear expects {} inputs, got {}", in_, x.describe());
  const Tensor* bias = bias_.empty() ? nullptr : &bias_;
  if (!reduce_over_ && !gather_over_) {
    ops.linear(x, weight_, bias, y, accumulate);
    return;
  }
  // This rank's part first: the collective needs it whole before anything adds to it.
  Tensor part = ops.empty({x.rows(), out_});
  ops.linear(x, weight_, bias, part, false);
  if (gather_over_) {
    STRATA_CHECK(!accumulate, "a vocab-parallel LM head does not add into its output");
    gather_over_->all_gather_cols(part, y);
    return;
  }
  reduce_over_->all_reduce_sum(part);
  if (accumulate)
    ops.add(y, part);
  else
    ops.copy(part, y);
}

RMSNorm RMSNorm::load(ParamLoader& w, const std::string& name, int64_t width, float eps,
                      float weight_offset) {
  RMSNorm n;
  n.weight_ = w.vector(name, width);
  n.eps_ = eps;
  n.offset_ = weight_offset;
  return n;
}

Tensor RMSNorm::forward(Ops& ops, const Tensor& x) const {
  return ops.rms_norm(x, weight_, eps_, offset_);
}

void RMSNorm::forward_into(Ops& ops, const Tensor& x, Tensor& out) const {
  ops.rms_norm(x, weight_, eps_, offset_, out);
}

Embedding Embedding::load(ParamLoader& w, const std::string& name, int64_t vocab, int64_t width) {
  Embedding e;
  e.table_ = w.matrix(name, vocab, width);
  return e;
}

Tensor Embedding::forward(Ops& ops, const Tensor& ids) const {
  Tensor out = ops.empty({ids.numel(), table_.dim(1)});
  ops.embedding(table_, ids, out);
  return out;
}

}  // namespace strata
