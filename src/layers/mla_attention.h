#pragma once
// Multi-head latent attention (DeepSeek-V2/V3). Keys and values of all heads are expanded
// from one small latent per token:
//
//   c_kv, k_pe = split(kv_a_proj_with_mqa x, [kv_lora_rank, rope_dim])
//   c_kv       = RMSNorm(c_kv)                               (kv_a_layernorm)
//   k_nope_h   = W_UK_h c_kv,  v_h = W_UV_h c_kv             (kv_b_proj rows of head h)
//   q_h        = [q_nope_h, rope(q_pe_h)],  k_h = [k_nope_h, rope(k_pe)]
//
// The cache holds only [c_kv, rope(k_pe)] per token: one row of kv_lora_rank + rope_dim,
// whose first kv_lora_rank columns are also the value (KVLayerLayout::v_in_k). Attention
// runs in the absorbed form, for prefill and decode alike:
//
//   q_nope_h . k_nope_h = (W_UK_h^T q_nope_h) . c_kv     -> q_h' = [W_UK_h^T q_nope_h, q_pe_h]
//   o_h = W_UV_h (sum_j p_hj c_kv_j)                      -> backend output is the latent mix
//
// so the backend attends over the latent cache exactly as over a one-KV-head cache whose key
// is kv_lora_rank + rope_dim wide and whose value is kv_lora_rank wide.
#include <string>

#include "cache/kv_layout.h"
#include "layers/linear.h"
#include "layers/rope.h"
#include "model/causal_lm.h"

namespace strata {

struct MLAOptions {
  int layer_id = 0;
  int hidden_size = 0, num_heads = 0;
  int q_lora_rank = 0;  // 0: q comes from q_proj directly (DeepSeek-V2-Lite)
  int kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool bias = false;  // attention_bias: q_a_proj, kv_a_proj_with_mqa, o_proj
  RopeConfig rope;
  bool rope_interleaved = true;  // rotate pairs (2i, 2i+1), as DeepSeek's checkpoints expect
  float scale = 0.0f;            // softmax scale (with DeepSeek's YaRN mscale^2 folded in)
};

// DeepSeek's softmax scale: 1/sqrt(qk_head_dim), times mscale(factor, mscale_all_dim)^2 when
// the rope is scaled (YaRN) and mscale_all_dim is set: the queries and keys were trained
// with cos/sin magnitudes that the attention factor alone does not restore.
float mla_softmax_scale(int qk_head_dim, const RopeConfig& rope);

class MLAAttention {
 public:
  MLAAttention(ParamLoader& w, const std::string& prefix, const MLAOptions& opt);
  // x [T, hidden] (normalized) -> residual += o_proj(attention)
  void forward(const Tensor& x, Tensor& residual, const ForwardBatch& batch,
               ForwardContext& ctx) const;
  // One latent "head": key = [c_kv, k_pe], value = c_kv.
  KVLayerLayout kv_layout() const;

 private:
  Tensor project_q(Ops& ops, const Tensor& x) const;

  MLAOptions opt_;
  Linear q_proj_, q_a_proj_, q_b_proj_, kv_a_proj_, o_proj_;
  RMSNorm q_a_norm_, kv_a_norm_;
  // kv_b_proj split per head at load time, in the forms the absorbed attention multiplies by:
  // w_uk_t_ [heads * kv_lora_rank, nope] (W_UK_h transposed: q_nope_h -> latent space) and
  // w_uv_ [heads * v_head_dim, kv_lora_rank] (latent mix -> value).
  Tensor w_uk_t_, w_uv_;
  RopeTable rope_;
};

}  // namespace strata
