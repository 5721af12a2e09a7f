#include "layers/mla_attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "attention/backend.h"
#include "core/error.h"

namespace strata {

namespace {
// DeepSeek builds q_a_layernorm and kv_a_layernorm without passing rms_norm_eps.
constexpr float kLatentNormEps = 1e-6f;
}  // namespace

float mla_softmax_scale(int qk_head_dim, const RopeConfig& rope) {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  if (rope.type != "default" && rope.mscale_all_dim != 0.0) {
    const double m = yarn_get_mscale(rope.factor, rope.mscale_all_dim);
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

// Tensor parallelism splits the heads: a rank holds its heads' rows of q_proj (q_b_proj) and
// kv_b_proj, and o_proj sums their parts. The latent projections (q_a, kv_a) and the latent
// cache are per token, not per head: every rank holds them whole.
MLAAttention::MLAAttention(ParamLoader& w, const std::string& prefix, const MLAOptions& opt)
    : opt_(opt) {
  const Communicator& group = w.tensor_parallel();
  STRATA_CHECK(opt.num_heads % group.size() == 0, "layer {}: {} heads over {} ranks", opt.layer_id,
               opt.num_heads, group.size());
  const Shard my_heads{group.rank(), group.size()};
  opt_.num_heads = static_cast<int>(my_heads.size(opt.num_heads));
  const int64_t qk_head = opt.qk_nope_head_dim + opt.qk_rope_head_dim;
  const int64_t q_out = int64_t{opt.num_heads} * qk_head;
  if (opt.q_lora_rank > 0) {
    q_a_proj_ = Linear::load(w, prefix + ".q_a_proj", opt.hidden_size, opt.q_lora_rank, opt.bias);
    q_a_norm_ = RMSNorm::load(w, prefix + ".q_a_layernorm.weight", opt.q_lora_rank, kLatentNormEps);
    q_b_proj_ = Linear::load_column_parallel(w, {prefix + ".q_b_proj"}, opt.q_lora_rank, {q_out},
                                             {my_heads}, false);
  } else {
    q_proj_ = Linear::load_column_parallel(w, {prefix + ".q_proj"}, opt.hidden_size, {q_out},
                                           {my_heads}, false);
  }
  kv_a_proj_ = Linear::load(w, prefix + ".kv_a_proj_with_mqa", opt.hidden_size,
                            opt.kv_lora_rank + opt.qk_rope_head_dim, opt.bias);
  kv_a_norm_ =
      RMSNorm::load(w, prefix + ".kv_a_layernorm.weight", opt.kv_lora_rank, kLatentNormEps);
  // kv_b_proj [heads * (nope + v), kv_lora_rank]: W_UK_h then W_UV_h for each head (this
  // rank's heads, from `first`).
  const int heads = opt_.num_heads, nope = opt.qk_nope_head_dim, v = opt.v_head_dim,
            latent = opt.kv_lora_rank;
  const auto first = static_cast<int>(my_heads.begin(opt.num_heads));
  const Tensor kv_b =
      w.host(prefix + ".kv_b_proj.weight", {int64_t{opt.num_heads} * (nope + v), latent});
  Tensor uk_t({int64_t{heads} * latent, nope}), uv({int64_t{heads} * v, latent});
  for (int h = 0; h < heads; ++h) {
    const float* w_uk = kv_b.row(int64_t{first + h} * (nope + v));  // [nope, latent]
    for (int i = 0; i < nope; ++i)
      for (int j = 0; j < latent; ++j) uk_t.row(int64_t{h} * latent + j)[i] = w_uk[i * latent + j];
    std::memcpy(uv.row(int64_t{h} * v), kv_b.row(int64_t{first + h} * (nope + v) + nope),
                sizeof(float) * v * latent);
  }
  w_uk_t_ = w.upload_matrix(uk_t);
  w_uv_ = w.upload_matrix(uv);
  o_proj_ = Linear::load_row_parallel(w, prefix + ".o_proj", int64_t{opt.num_heads} * v,
                                      opt.hidden_size, opt.bias);
  rope_ = RotaryEmbedding(opt.rope, opt.qk_rope_head_dim, opt.rope_interleaved).table(w);
  STRATA_CHECK(opt.scale > 0.0f, "MLA layer {} built without a softmax scale", opt.layer_id);
}

KVLayerLayout MLAAttention::kv_layout() const {
  return KVLayerLayout{1, opt_.kv_lora_rank + opt_.qk_rope_head_dim, opt_.kv_lora_rank, true};
}

Tensor MLAAttention::project_q(Ops& ops, const Tensor& x) const {
  if (opt_.q_lora_rank == 0) return q_proj_.forward(ops, x);
  Tensor q_latent = q_a_proj_.forward(ops, x);
  return q_b_proj_.forward(ops, q_a_norm_.forward(ops, q_latent));
}

void MLAAttention::forward(const Tensor& x, Tensor& residual, const ForwardBatch&,
                           ForwardContext& ctx) const {
  Ops& ops = *ctx.ops;
  const int64_t t = x.rows();
  const int heads = opt_.num_heads, nope = opt_.qk_nope_head_dim, rope_dim = opt_.qk_rope_head_dim;
  const int64_t qk_head = nope + rope_dim;
  // Widths of what is cached and attended, from the layout the pool was built from.
  const KVLayerLayout layout = kv_layout();
  const int latent = layout.v_head_dim, key_width = layout.k_head_dim;

  // q [T, heads, nope | rope];  cached row [T, c_kv | k_pe], both roped in place.
  Tensor q = project_q(ops, x);
  Tensor kv_row = kv_a_proj_.forward(ops, x);
  Tensor c_kv = kv_row.slice_cols(0, latent);
  kv_a_norm_.forward_into(ops, c_kv, c_kv);
  Tensor q_pe = q.slice_cols(nope, q.cols() - nope);  // head h's rope part at h * qk_head
  ops.rope(q_pe, heads, qk_head, ctx.positions, rope_);
  Tensor k_pe = kv_row.slice_cols(latent, rope_dim);
  ops.rope(k_pe, 1, rope_dim, ctx.positions, rope_);

  // Absorbed query q' [T, heads, c_kv-space | rope] = [W_UK_h^T q_nope_h, q_pe_h].
  // Seen per head ([T * heads, width] rows), each piece is one strided copy.
  const int64_t rows = t * heads;
  const Tensor q_heads = q.reshaped({rows, qk_head});
  Tensor q_nope = ops.empty({rows, nope});
  ops.copy(q_heads.slice_cols(0, nope), q_nope);
  Tensor q_latent = ops.empty({t, int64_t{heads} * latent});
  ops.head_linear(q_nope.reshaped({t, int64_t{heads} * nope}), w_uk_t_, heads, q_latent);
  Tensor q_absorbed = ops.empty({t, int64_t{heads} * key_width});
  const Tensor q_abs_heads = q_absorbed.reshaped({rows, key_width});
  Tensor q_abs_latent = q_abs_heads.slice_cols(0, latent),
         q_abs_pe = q_abs_heads.slice_cols(latent, rope_dim);
  ops.copy(q_latent.reshaped({rows, latent}), q_abs_latent);
  ops.copy(q_heads.slice_cols(nope, rope_dim), q_abs_pe);

  // Attention over the latent cache: out_latent [T, heads, kv_lora_rank].
  Tensor out_latent = ops.empty_activation({t, int64_t{heads} * latent});
  AttentionCall call;
  call.layer_id = opt_.layer_id;
  call.num_q_heads = heads;
  call.scale = opt_.scale;
  STRATA_CHECK(ctx.attention != nullptr, "layer {} has attention but no backend is set",
               opt_.layer_id);
  ctx.attention->forward(call, q_absorbed, kv_row, Tensor{}, out_latent);

  // Per-head values: o_h = W_UV_h . out_latent_h, then the output projection.
  Tensor attn = ops.empty_activation({t, int64_t{heads} * opt_.v_head_dim});
  ops.head_linear(out_latent, w_uv_, heads, attn);
  o_proj_.forward_into(ops, attn, residual, /*accumulate=*/true);
}

}  // namespace strata
