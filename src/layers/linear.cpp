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

Linear Linear::from_tensors(Tensor weight, Tensor bias) {
  Linear l;
  l.out_ = weight.dim(0);
  l.in_ = weight.dim(1);
  l.weight_ = std::move(weight);
  l.bias_ = std::move(bias);
  return l;
}

Tensor Linear::forward(Ops& ops, const Tensor& x) const {
  Tensor y = ops.empty({x.rows(), out_});
  forward_into(ops, x, y);
  return y;
}

void Linear::forward_into(Ops& ops, const Tensor& x, Tensor& y, bool accumulate) const {
  STRATA_CHECK(x.cols() == in_, "linear expects {} inputs, got {}", in_, x.describe());
  ops.linear(x, weight_, bias_.empty() ? nullptr : &bias_, y, accumulate);
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
