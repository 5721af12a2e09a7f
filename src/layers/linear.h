#pragma once
// Shared building blocks every model family is made of: linear projections, RMSNorm,
// embeddings. Weights are f32 on the CPU path.
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/weights.h"

namespace strata {

class Linear {
 public:
  Linear() = default;
  // `prefix.weight` [out, in] and, with `bias`, `prefix.bias` [out].
  static Linear load(WeightSource& w, const std::string& prefix, int64_t in, int64_t out,
                     bool bias);
  // Several projections of the same input stacked along the output dimension, run as one
  // GEMM (q|k|v, gate|up). Output columns follow the order of `prefixes`.
  static Linear load_stacked(WeightSource& w, const std::vector<std::string>& prefixes, int64_t in,
                             const std::vector<int64_t>& outs, bool bias);
  static Linear from_tensors(Tensor weight, Tensor bias = {});

  Tensor forward(const Tensor& x) const;  // [T, in] -> [T, out]
  void forward(const float* x, int64_t rows, float* y) const;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
  int64_t in_ = 0, out_ = 0;
};

class RMSNorm {
 public:
  RMSNorm() = default;
  // `weight_offset` 1 for checkpoints that store (w - 1), as Gemma does.
  static RMSNorm load(WeightSource& w, const std::string& name, int64_t width, float eps,
                      float weight_offset = 0.0f);
  // Normalizes each `width()`-wide row of x [rows, width] into out (may alias x).
  void forward(const float* x, int64_t rows, float* out) const;
  Tensor forward(const Tensor& x) const;
  int64_t width() const { return weight_.numel(); }

 private:
  Tensor weight_;
  float eps_ = 1e-6f, offset_ = 0.0f;
};

class Embedding {
 public:
  Embedding() = default;
  static Embedding load(WeightSource& w, const std::string& name, int64_t vocab, int64_t width);
  Tensor forward(const std::vector<int32_t>& ids) const;  // [T, width]
  const Tensor& table() const { return table_; }

 private:
  Tensor table_;
};

}  // namespace strata
