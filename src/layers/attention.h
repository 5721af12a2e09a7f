#pragma once
// Multi-head attention with grouped KV heads (MHA / GQA / MQA), as Llama, Qwen, Mistral and
// the attention layers of hybrid models use it: fused q|k|v projection (optional bias),
// optional per-head q/k RMSNorm (Qwen3), rotary embedding, the attention backend over the
// paged cache, output projection.
#include <optional>
#include <string>

#include "cache/kv_layout.h"
#include "layers/linear.h"
#include "layers/rope.h"
#include "model/causal_lm.h"

namespace strata {

struct AttentionOptions {
  int layer_id = 0;
  int hidden_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool qkv_bias = false, o_bias = false;
  bool qk_norm = false;  // per-head RMSNorm of q and k before rope (Qwen3)
  // Qwen3-Next's gated attention: q_proj also makes a gate per head (its rows interleave
  // [q_h | gate_h] head by head) and the attention output is multiplied by sigmoid(gate).
  bool output_gate = false;
  float norm_eps = 1e-6f;
  float norm_weight_offset = 0.0f;  // 1 for (1 + w) q/k norms (Gemma 3, Qwen3-Next)
  bool sinks = false;               // a learned sink logit per q head, `prefix.sinks` (gpt-oss)
  float logit_softcap = 0.0f;       // tanh soft-capping of the scores; 0 = off
  int sliding_window = 0;
  bool use_rope = true;
  RopeConfig rope;
  float scale = 0.0f;    // 0: 1/sqrt(head_dim)
  float k_scale = 1.0f;  // multiplies k after its projection (Falcon-H1's key_multiplier)
  std::string q = "q_proj", k = "k_proj", v = "v_proj", o = "o_proj";
  std::string q_norm = "q_norm", k_norm = "k_norm";
};

// What every family's attention layer reads from config.json: sizes, attention_bias for the
// q|k|v and o projections, the layer's rope (sliding layers may have their own) and sliding
// window. Families set the rest.
AttentionOptions attention_options_from_config(const ModelConfig& c, int layer_id);

// Under tensor parallelism a rank holds its share of the heads (model/shard.h) and its KV
// layout reports only those: each rank's pool caches its own KV heads.
class GQAAttention {
 public:
  GQAAttention(ParamLoader& w, const std::string& prefix, const AttentionOptions& opt);
  // x [T, hidden] (normalized) -> residual += o_proj(attention): the output projection adds
  // into the residual stream.
  void forward(const Tensor& x, Tensor& residual, const ForwardBatch& batch,
               ForwardContext& ctx) const;
  // The same, returning the projected output [T, hidden] instead (blocks that scale it).
  Tensor forward(const Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) const;
  KVLayerLayout kv_layout() const;

 private:
  // The attention output before o_proj: [T, heads * head_dim] in the activation dtype.
  Tensor attend(const Tensor& x, ForwardContext& ctx) const;
  static Linear gated_qkv(ParamLoader& w, const std::string& prefix, const AttentionOptions& opt,
                          const Shard& q_heads, const Shard& kv_heads);

  AttentionOptions opt_;
  Linear qkv_, o_;
  RMSNorm q_norm_, k_norm_;
  Tensor sinks_;  // [num_heads] f32, when opt_.sinks
  RopeTable rope_;
};

// act(gate(x)) * up(x) -> down: SwiGLU (silu) or GeGLU (gelu, gelu_pytorch_tanh).
class GatedMLP {
 public:
  GatedMLP(ParamLoader& w, const std::string& prefix, int hidden, int intermediate,
           Activation act = Activation::Silu, bool bias = false, std::string gate = "gate_proj",
           std::string up = "up_proj", std::string down = "down_proj");
  // residual += down(act(gate x) * up x)
  void forward(Ops& ops, const Tensor& x, Tensor& residual) const;
  Tensor forward(Ops& ops, const Tensor& x) const;

 private:
  Tensor hidden_activation(Ops& ops, const Tensor& x) const;
  Linear gate_up_, down_;
  int intermediate_;
  Activation act_;
};

}  // namespace strata
