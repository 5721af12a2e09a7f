#pragma once
// LFM2's short-conv mixer: a gated causal depthwise conv, no SSM.
//   [B | C | x] = in_proj(h);   y = out_proj(C * conv(B * x))
// conv is a depthwise causal conv of kernel `conv_L_cache` (+ bias with conv_bias) without an
// activation; its state is the last kernel-1 inputs (B * x) of each request, kept in the
// StatePool as a conv state of `hidden` channels (RecurrentKind::ShortConv, no SSM state), so
// chunked prefill, decode and prefix caching carry it exactly as they carry Mamba2's conv.
// Written once for every device: each step is an op (ops/ops.h), batched over the pass.
#include "cache/state_layout.h"
#include "layers/linear.h"
#include "model/causal_lm.h"

namespace strata {

struct ShortConvOptions {
  int layer_id = 0;
  int hidden_size = 0;
  int kernel = 3;     // conv_L_cache
  bool bias = false;  // conv_bias: in_proj, conv and out_proj all have biases
};

class ShortConvMixer {
 public:
  ShortConvMixer(ParamLoader& w, const std::string& prefix, const ShortConvOptions& opt);
  // x [T, hidden] (normalized) -> residual += the mixer's output; reads and updates each
  // request's state slot.
  void forward(const Tensor& x, Tensor& residual, const ForwardBatch& batch,
               ForwardContext& ctx) const;
  RecurrentStateLayout state_layout() const;

 private:
  ShortConvOptions opt_;
  int64_t channels_ = 0;  // this tensor-parallel rank's channels (hidden_size with one rank)
  Linear in_proj_, out_proj_;
  Tensor conv_weight_, conv_bias_;  // [channels, kernel], [channels] f32 on the stage's device
};

}  // namespace strata
