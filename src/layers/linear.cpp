#include "layers/linear.h"

#include <cstring>

#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"

namespace strata {

Linear Linear::load(WeightSource& w, const std::string& prefix, int64_t in, int64_t out,
                    bool bias) {
  Linear l;
  l.in_ = in;
  l.out_ = out;
  l.weight_ = w.load(prefix + ".weight", {out, in});
  if (bias) l.bias_ = w.load(prefix + ".bias", {out});
  return l;
}

Linear Linear::load_stacked(WeightSource& w, const std::vector<std::string>& prefixes, int64_t in,
                            const std::vector<int64_t>& outs, bool bias) {
  STRATA_CHECK(prefixes.size() == outs.size(), "{} prefixes, {} sizes", prefixes.size(),
               outs.size());
  int64_t total = 0;
  for (auto o : outs) total += o;
  Linear l;
  l.in_ = in;
  l.out_ = total;
  l.weight_ = Tensor({total, in});
  if (bias) l.bias_ = Tensor({total});
  int64_t row = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    Tensor part = w.load(prefixes[i] + ".weight", {outs[i], in});
    std::memcpy(l.weight_.row(row), part.data(), sizeof(float) * part.numel());
    if (bias) {
      Tensor b = w.load(prefixes[i] + ".bias", {outs[i]});
      std::memcpy(l.bias_.data() + row, b.data(), sizeof(float) * outs[i]);
    }
    row += outs[i];
  }
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

Tensor Linear::forward(const Tensor& x) const {
  STRATA_CHECK(x.dim(-1) == in_, "linear expects {} inputs, got {}", in_, x.shape_str());
  const int64_t rows = x.numel() / in_;
  Tensor y({rows, out_});
  forward(x.data(), rows, y.data());
  return y;
}

void Linear::forward(const float* x, int64_t rows, float* y) const {
  cpu::linear(x, rows, in_, weight_.data(), out_, bias_.empty() ? nullptr : bias_.data(), y);
}

RMSNorm RMSNorm::load(WeightSource& w, const std::string& name, int64_t width, float eps,
                      float weight_offset) {
  RMSNorm n;
  n.weight_ = w.load(name, {width});
  n.eps_ = eps;
  n.offset_ = weight_offset;
  return n;
}

void RMSNorm::forward(const float* x, int64_t rows, float* out) const {
  cpu::rms_norm(x, weight_.data(), rows, width(), eps_, out, offset_);
}

Tensor RMSNorm::forward(const Tensor& x) const {
  Tensor out(x.shape());
  forward(x.data(), x.numel() / width(), out.data());
  return out;
}

Embedding Embedding::load(WeightSource& w, const std::string& name, int64_t vocab, int64_t width) {
  Embedding e;
  e.table_ = w.load(name, {vocab, width});
  return e;
}

Tensor Embedding::forward(const std::vector<int32_t>& ids) const {
  const int64_t width = table_.dim(1), vocab = table_.dim(0);
  Tensor out({static_cast<int64_t>(ids.size()), width});
  for (size_t i = 0; i < ids.size(); ++i) {
    STRATA_CHECK(ids[i] >= 0 && ids[i] < vocab, "token id {} outside vocabulary {}", ids[i], vocab);
    std::memcpy(out.row(i), table_.row(ids[i]), sizeof(float) * width);
  }
  return out;
}

}  // namespace strata
