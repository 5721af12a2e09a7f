#include "layers/attention.h"

#include <cmath>
#include <cstring>

#include "attention/backend.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace strata {

AttentionOptions attention_options_from_config(const ModelConfig& c, int layer_id) {
  AttentionOptions o;
  o.layer_id = layer_id;
  o.hidden_size = c.hidden_size;
  o.num_heads = c.num_attention_heads;
  o.num_kv_heads = c.num_kv_heads;
  o.head_dim = c.head_dim;
  o.qkv_bias = o.o_bias = c.attention_bias;
  o.norm_eps = static_cast<float>(c.rms_norm_eps);
  o.sliding_window = c.layers[layer_id].sliding_window;
  o.rope = c.rope;
  return o;
}

void add_residual(Tensor& x, const Tensor& y) {
  if (x.numel() != y.numel())
    fail("residual add of {} and {}: shapes differ (a bug in the model code)", x.shape_str(),
         y.shape_str());
  cpu::add_inplace(x.data(), y.data(), x.numel());
}

GQAAttention::GQAAttention(WeightSource& w, const std::string& prefix, const AttentionOptions& opt)
    : opt_(opt) {
  const int64_t q_out = int64_t{opt.num_heads} * opt.head_dim,
                kv_out = int64_t{opt.num_kv_heads} * opt.head_dim;
  qkv_ = Linear::load_stacked(w, {prefix + "." + opt.q, prefix + "." + opt.k, prefix + "." + opt.v},
                              opt.hidden_size, {q_out, kv_out, kv_out}, opt.qkv_bias);
  o_ = Linear::load(w, prefix + "." + opt.o, q_out, opt.hidden_size, opt.o_bias);
  if (opt.qk_norm) {
    q_norm_ = RMSNorm::load(w, prefix + "." + opt.q_norm + ".weight", opt.head_dim, opt.norm_eps);
    k_norm_ = RMSNorm::load(w, prefix + "." + opt.k_norm + ".weight", opt.head_dim, opt.norm_eps);
  }
  if (opt.use_rope) {
    const int rotary_dim = static_cast<int>(opt.head_dim * opt.rope.partial_rotary_factor);
    rope_ = RotaryEmbedding(opt.rope, rotary_dim);
  }
  if (opt_.scale == 0.0f) opt_.scale = 1.0f / std::sqrt(static_cast<float>(opt.head_dim));
}

KVLayerLayout GQAAttention::kv_layout() const {
  return KVLayerLayout{opt_.num_kv_heads, opt_.head_dim, opt_.head_dim, false};
}

Tensor GQAAttention::forward(const Tensor& x, const ForwardBatch& batch,
                             ForwardContext& ctx) const {
  const int64_t t = x.dim(0);
  const int hd = opt_.head_dim, hq = opt_.num_heads, hkv = opt_.num_kv_heads;
  const int64_t q_w = int64_t{hq} * hd, kv_w = int64_t{hkv} * hd, row = q_w + 2 * kv_w;
  Tensor qkv = qkv_.forward(x);  // [T, q | k | v]
  if (opt_.qk_norm) {
    for (int64_t i = 0; i < t; ++i) {
      q_norm_.forward(qkv.row(i), hq, qkv.row(i));
      k_norm_.forward(qkv.row(i) + q_w, hkv, qkv.row(i) + q_w);
    }
  }
  if (opt_.k_scale != 1.0f)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < kv_w; ++j) qkv.row(i)[q_w + j] *= opt_.k_scale;
  if (opt_.use_rope) {
    rope_.apply(qkv.data(), t, hq, row, hd, batch.positions.data());
    rope_.apply(qkv.data() + q_w, t, hkv, row, hd, batch.positions.data());
  }
  // Split into contiguous q, k, v for the backend.
  Tensor q({t, q_w}), k({t, kv_w}), v({t, kv_w});
  for (int64_t i = 0; i < t; ++i) {
    std::memcpy(q.row(i), qkv.row(i), sizeof(float) * q_w);
    std::memcpy(k.row(i), qkv.row(i) + q_w, sizeof(float) * kv_w);
    std::memcpy(v.row(i), qkv.row(i) + q_w + kv_w, sizeof(float) * kv_w);
  }
  Tensor attn({t, q_w});
  AttentionCall call;
  call.layer_id = opt_.layer_id;
  call.num_q_heads = hq;
  call.scale = opt_.scale;
  call.sliding_window = opt_.sliding_window;
  STRATA_CHECK(ctx.attention != nullptr, "layer {} has attention but no backend is set",
               opt_.layer_id);
  ctx.attention->forward(call, q.data(), k.data(), v.data(), attn.data());
  return o_.forward(attn);
}

GatedMLP::GatedMLP(WeightSource& w, const std::string& prefix, int hidden, int intermediate,
                   const std::string& act, bool bias, std::string gate, std::string up,
                   std::string down)
    : intermediate_(intermediate) {
  if (act == "silu" || act == "swish")
    gelu_ = false;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu")
    gelu_ = true;
  else
    fail("config.json: hidden_act '{}' is not supported (supported: silu, gelu_pytorch_tanh)", act);
  gate_up_ = Linear::load_stacked(w, {prefix + "." + gate, prefix + "." + up}, hidden,
                                  {intermediate, intermediate}, bias);
  down_ = Linear::load(w, prefix + "." + down, intermediate, hidden, bias);
}

Tensor GatedMLP::forward(const Tensor& x) const {
  const int64_t t = x.dim(0);
  Tensor gate_up = gate_up_.forward(x);
  Tensor act({t, intermediate_});
  if (gelu_)
    cpu::gelu_tanh_and_mul(gate_up.data(), t, intermediate_, act.data());
  else
    cpu::silu_and_mul(gate_up.data(), t, intermediate_, act.data());
  return down_.forward(act);
}

}  // namespace strata
