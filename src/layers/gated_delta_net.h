#pragma once
// Qwen3-Next's Gated DeltaNet (linear attention) mixer:
//   [q | k | v | z | b | a] = in_proj(h)          (in_proj_qkvz and in_proj_ba, rows regrouped
//                                                   at load from the checkpoint's per-key-head
//                                                   interleaving into one projection)
//   [q | k | v] = silu(causal_depthwise_conv1d([q | k | v]))     (state: the last kernel-1 inputs)
//   y = gated delta rule(q, k, v, beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias))
//                                                   (state: [v_heads, k_dim, v_dim])
//   out = out_proj(RMSNorm_per_head(y) * w * silu(z))
// Prefill runs the chunked form from the request's cached state, decode the recurrence
// (Ops::gated_delta_rule); both states live in the StatePool like Mamba2's. Written once for
// every device: each step is an op (ops/ops.h), batched over the pass.
#include "cache/state_layout.h"
#include "layers/linear.h"
#include "model/causal_lm.h"

namespace strata {

struct GatedDeltaNetOptions {
  int layer_id = 0;
  int hidden_size = 0;
  int num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int conv_kernel = 4;
  int chunk_size = 64;
  float norm_eps = 1e-6f;

  int key_dim() const { return num_k_heads * k_dim; }
  int value_dim() const { return num_v_heads * v_dim; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
};
// The linear_* keys of config.json, checked.
GatedDeltaNetOptions gated_delta_net_options(const ModelConfig& c, int layer_id);

class GatedDeltaNetMixer {
 public:
  GatedDeltaNetMixer(ParamLoader& w, const std::string& prefix, const GatedDeltaNetOptions& opt);
  // x [T, hidden] (normalized) -> residual += the mixer's output; reads and updates each
  // request's state slot.
  void forward(const Tensor& x, Tensor& residual, const ForwardBatch& batch,
               ForwardContext& ctx) const;
  RecurrentStateLayout state_layout() const;

 private:
  GatedDeltaNetOptions opt_;
  Linear in_proj_, out_proj_;  // in_proj_: [q | k | v | z | b | a]
  Tensor conv_weight_;         // [conv_dim, kernel] f32
  DeltaNetParams rule_;
  Tensor norm_weight_;  // [value_dim]: the per-head norm weight repeated for every head
};

}  // namespace strata
