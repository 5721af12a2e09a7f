#include "layers/attention.h"

#include <algorithm>
#include <cmath>

#include "attention/backend.h"
#include "core/error.h"

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
  o.rope = c.rope_of(layer_id);
  return o;
}

// The fused projection of gated attention, columns [q | k | v | gate]: q_proj's rows are
// [q_h | gate_h] per head; they are split so that q and k stay adjacent (one rope over both)
// and the gate comes last. Only the heads of `q_heads` and `kv_heads` (this TP rank's).
Linear GQAAttention::gated_qkv(ParamLoader& w, const std::string& prefix,
                               const AttentionOptions& opt, const Shard& q_heads,
                               const Shard& kv_heads) {
  if (opt.qkv_bias)
    fail("config.json: attention_bias with a gated q_proj (layer {}) is not supported",
         opt.layer_id);
  const int64_t hd = opt.head_dim, H = opt.hidden_size, q_out = int64_t{opt.num_heads} * hd,
                kv_out = int64_t{opt.num_kv_heads} * hd;
  const Tensor q = w.host(prefix + "." + opt.q + ".weight", {2 * q_out, H});
  const Tensor k = w.host(prefix + "." + opt.k + ".weight", {kv_out, H});
  const Tensor v = w.host(prefix + "." + opt.v + ".weight", {kv_out, H});
  const int64_t heads = q_heads.size(opt.num_heads), first = q_heads.begin(opt.num_heads);
  const int64_t kv_rows = kv_heads.size(opt.num_kv_heads) * hd,
                kv_first = kv_heads.begin(opt.num_kv_heads) * hd;
  Tensor fused({2 * heads * hd + 2 * kv_rows, H});
  float* out = fused.data();
  auto put_rows = [&](const float* src, int64_t rows) {
    std::copy_n(src, rows * H, out);
    out += rows * H;
  };
  for (int64_t h = first; h < first + heads; ++h) put_rows(q.data() + 2 * h * hd * H, hd);
  put_rows(k.row(kv_first), kv_rows);
  put_rows(v.row(kv_first), kv_rows);
  for (int64_t h = first; h < first + heads; ++h) put_rows(q.data() + (2 * h + 1) * hd * H, hd);
  return Linear::from_tensors(w.upload_matrix(fused));
}

GQAAttention::GQAAttention(ParamLoader& w, const std::string& prefix, const AttentionOptions& opt)
    : opt_(opt) {
  // Tensor parallelism: this rank's query heads, and the KV heads they read (split, or
  // replicated when there are fewer KV heads than ranks); o_proj sums the heads' parts.
  const Communicator& group = w.tensor_parallel();
  const Shard q_heads{group.rank(), group.size()};
  const Shard kv_heads = head_group_shard(opt.num_kv_heads, group.rank(), group.size());
  STRATA_CHECK(opt.num_heads % group.size() == 0, "layer {}: {} heads over {} ranks", opt.layer_id,
               opt.num_heads, group.size());
  opt_.num_heads = static_cast<int>(q_heads.size(opt.num_heads));
  opt_.num_kv_heads = static_cast<int>(kv_heads.size(opt.num_kv_heads));
  const int64_t hd = opt.head_dim, q_out = int64_t{opt.num_heads} * hd,
                kv_out = int64_t{opt.num_kv_heads} * hd;
  if (opt.output_gate) {
    qkv_ = gated_qkv(w, prefix, opt, q_heads, kv_heads);
  } else {
    qkv_ = Linear::load_column_parallel(
        w, {prefix + "." + opt.q, prefix + "." + opt.k, prefix + "." + opt.v}, opt.hidden_size,
        {q_out, kv_out, kv_out}, {q_heads, kv_heads, kv_heads}, opt.qkv_bias);
  }
  o_ = Linear::load_row_parallel(w, prefix + "." + opt.o, q_out, opt.hidden_size, opt.o_bias);
  if (opt.qk_norm) {
    q_norm_ = RMSNorm::load(w, prefix + "." + opt.q_norm + ".weight", opt.head_dim, opt.norm_eps,
                            opt.norm_weight_offset);
    k_norm_ = RMSNorm::load(w, prefix + "." + opt.k_norm + ".weight", opt.head_dim, opt.norm_eps,
                            opt.norm_weight_offset);
  }
  if (opt.sinks) sinks_ = w.vector(prefix + ".sinks", opt.num_heads, q_heads);
  if (opt.use_rope) {
    const int rotary_dim = static_cast<int>(opt.head_dim * opt.rope.partial_rotary_factor);
    rope_ = RotaryEmbedding(opt.rope, rotary_dim).table(w);
  }
  if (opt_.scale == 0.0f) opt_.scale = 1.0f / std::sqrt(static_cast<float>(opt.head_dim));
}

KVLayerLayout GQAAttention::kv_layout() const {
  KVLayerLayout l{opt_.num_kv_heads, opt_.head_dim, opt_.head_dim, false};
  l.sliding_window = opt_.sliding_window;
  return l;
}

Tensor GQAAttention::attend(const Tensor& x, ForwardContext& ctx) const {
  Ops& ops = *ctx.ops;
  const int hd = opt_.head_dim, hq = opt_.num_heads, hkv = opt_.num_kv_heads;
  const int64_t q_w = int64_t{hq} * hd, kv_w = int64_t{hkv} * hd;
  Tensor qkv = qkv_.forward(ops, x);  // [T, q | k | v] f32
  Tensor q = qkv.slice_cols(0, q_w), k = qkv.slice_cols(q_w, kv_w),
         v = qkv.slice_cols(q_w + kv_w, kv_w);
  if (opt_.qk_norm) {  // per head: the norm weight is head_dim wide
    q_norm_.forward_into(ops, q, q);
    k_norm_.forward_into(ops, k, k);
  }
  if (opt_.k_scale != 1.0f) ops.scale(k, opt_.k_scale);
  Tensor attn = ops.empty_activation({x.rows(), q_w});
  AttentionCall call;
  call.layer_id = opt_.layer_id;
  call.num_q_heads = hq;
  call.scale = opt_.scale;
  call.sliding_window = opt_.sliding_window;
  call.logit_softcap = opt_.logit_softcap;
  call.sinks = opt_.sinks ? &sinks_ : nullptr;
  if (opt_.use_rope) {  // rotated by the backend, as it stores k (backend.h)
    call.rope = &rope_;
    call.rope_positions = &ctx.positions;
  }
  STRATA_CHECK(ctx.attention != nullptr, "layer {} has attention but no backend is set",
               opt_.layer_id);
  ctx.attention->forward(call, q, k, v, attn);
  if (opt_.output_gate) ops.mul(attn, qkv.slice_cols(q_w + 2 * kv_w, q_w), true, attn);
  return attn;
}

void GQAAttention::forward(const Tensor& x, Tensor& residual, const ForwardBatch&,
                           ForwardContext& ctx) const {
  o_.forward_into(*ctx.ops, attend(x, ctx), residual, /*accumulate=*/true);
}

Tensor GQAAttention::forward(const Tensor& x, const ForwardBatch&, ForwardContext& ctx) const {
  return o_.forward(*ctx.ops, attend(x, ctx));
}

GatedMLP::GatedMLP(ParamLoader& w, const std::string& prefix, int hidden, int intermediate,
                   Activation act, bool bias, std::string gate, std::string up, std::string down)
    : act_(act) {
  // Tensor parallelism: this rank's intermediate columns of gate and up, down_proj sums them.
  const Communicator& group = w.tensor_parallel();
  const Shard columns{group.rank(), group.size()};
  STRATA_CHECK(intermediate % group.size() == 0, "{}: intermediate size {} over {} ranks", prefix,
               intermediate, group.size());
  intermediate_ = static_cast<int>(columns.size(intermediate));
  gate_up_ = Linear::load_column_parallel(w, {prefix + "." + gate, prefix + "." + up}, hidden,
                                          {intermediate, intermediate}, {columns, columns}, bias);
  down_ = Linear::load_row_parallel(w, prefix + "." + down, intermediate, hidden, bias);
}

Tensor GatedMLP::hidden_activation(Ops& ops, const Tensor& x) const {
  const Tensor gate_up = gate_up_.forward(ops, x);
  Tensor act = ops.empty_activation({x.rows(), intermediate_});
  ops.gated_activation(gate_up, act_, act);
  return act;
}

void GatedMLP::forward(Ops& ops, const Tensor& x, Tensor& residual) const {
  down_.forward_into(ops, hidden_activation(ops, x), residual, /*accumulate=*/true);
}

Tensor GatedMLP::forward(Ops& ops, const Tensor& x) const {
  return down_.forward(ops, hidden_activation(ops, x));
}

}  // namespace strata
