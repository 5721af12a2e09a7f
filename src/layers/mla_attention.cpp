#include "layers/mla_attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "attention/backend.h"
#include "core/error.h"
#include "kernels/cpu/gemm.h"

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

MLAAttention::MLAAttention(WeightSource& w, const std::string& prefix, const MLAOptions& opt)
    : opt_(opt) {
  const int64_t qk_head = opt.qk_nope_head_dim + opt.qk_rope_head_dim;
  const int64_t q_out = int64_t{opt.num_heads} * qk_head;
  if (opt.q_lora_rank > 0) {
    q_a_proj_ = Linear::load(w, prefix + ".q_a_proj", opt.hidden_size, opt.q_lora_rank, opt.bias);
    q_a_norm_ = RMSNorm::load(w, prefix + ".q_a_layernorm.weight", opt.q_lora_rank, kLatentNormEps);
    q_b_proj_ = Linear::load(w, prefix + ".q_b_proj", opt.q_lora_rank, q_out, false);
  } else {
    q_proj_ = Linear::load(w, prefix + ".q_proj", opt.hidden_size, q_out, false);
  }
  kv_a_proj_ = Linear::load(w, prefix + ".kv_a_proj_with_mqa", opt.hidden_size,
                            opt.kv_lora_rank + opt.qk_rope_head_dim, opt.bias);
  kv_a_norm_ =
      RMSNorm::load(w, prefix + ".kv_a_layernorm.weight", opt.kv_lora_rank, kLatentNormEps);
  kv_b_ =
      w.load(prefix + ".kv_b_proj.weight",
             {int64_t{opt.num_heads} * (opt.qk_nope_head_dim + opt.v_head_dim), opt.kv_lora_rank});
  o_proj_ = Linear::load(w, prefix + ".o_proj", int64_t{opt.num_heads} * opt.v_head_dim,
                         opt.hidden_size, opt.bias);
  rope_ = RotaryEmbedding(opt.rope, opt.qk_rope_head_dim, opt.rope_interleaved);
  STRATA_CHECK(opt.scale > 0.0f, "MLA layer {} built without a softmax scale", opt.layer_id);
}

KVLayerLayout MLAAttention::kv_layout() const {
  return KVLayerLayout{1, opt_.kv_lora_rank + opt_.qk_rope_head_dim, opt_.kv_lora_rank, true};
}

Tensor MLAAttention::project_q(const Tensor& x) const {
  if (opt_.q_lora_rank == 0) return q_proj_.forward(x);
  Tensor q_latent = q_a_proj_.forward(x);
  q_a_norm_.forward(q_latent.data(), q_latent.dim(0), q_latent.data());
  return q_b_proj_.forward(q_latent);
}

Tensor MLAAttention::forward(const Tensor& x, const ForwardBatch& batch,
                             ForwardContext& ctx) const {
  const int64_t t = x.dim(0);
  const int heads = opt_.num_heads, nope = opt_.qk_nope_head_dim, rope_dim = opt_.qk_rope_head_dim;
  const int v_dim = opt_.v_head_dim;
  const int64_t qk_head = nope + rope_dim, uk_uv_rows = nope + v_dim;
  // Widths of what is cached and attended, from the layout the pool was built from.
  const KVLayerLayout layout = kv_layout();
  const int latent = layout.v_head_dim, key_width = layout.k_head_dim;

  // q [T, heads, nope | rope];  cached row [T, c_kv | k_pe], both roped in place.
  Tensor q = project_q(x);
  Tensor kv_row = kv_a_proj_.forward(x);
  for (int64_t i = 0; i < t; ++i) kv_a_norm_.forward(kv_row.row(i), 1, kv_row.row(i));  // c_kv only
  rope_.apply(q.data() + nope, t, heads, heads * qk_head, qk_head, batch.positions.data());
  rope_.apply(kv_row.data() + latent, t, 1, key_width, rope_dim, batch.positions.data());

  // Absorbed query q' [T, heads, c_kv-space | rope] = [W_UK_h^T q_nope_h, q_pe_h].
  Tensor q_absorbed({t, int64_t{heads} * key_width});
  std::vector<float> q_nope(static_cast<size_t>(t) * nope),
      q_latent(static_cast<size_t>(t) * latent);
  for (int h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(q_nope.data() + i * nope, q.row(i) + h * qk_head, sizeof(float) * nope);
    const float* w_uk = kv_b_.row(h * uk_uv_rows);  // [nope, kv_lora_rank]
    cpu::matmul(q_nope.data(), t, nope, w_uk, latent, q_latent.data());
    for (int64_t i = 0; i < t; ++i) {
      float* dst = q_absorbed.row(i) + int64_t{h} * key_width;
      std::memcpy(dst, q_latent.data() + i * latent, sizeof(float) * latent);
      std::memcpy(dst + latent, q.row(i) + h * qk_head + nope, sizeof(float) * rope_dim);
    }
  }

  // Attention over the latent cache: out_latent [T, heads, kv_lora_rank].
  Tensor out_latent({t, int64_t{heads} * latent});
  AttentionCall call;
  call.layer_id = opt_.layer_id;
  call.num_q_heads = heads;
  call.scale = opt_.scale;
  STRATA_CHECK(ctx.attention != nullptr, "layer {} has attention but no backend is set",
               opt_.layer_id);
  ctx.attention->forward(call, q_absorbed.data(), kv_row.data(), nullptr, out_latent.data());

  // Per-head values: o_h = W_UV_h . out_latent_h, then the output projection.
  Tensor attn({t, int64_t{heads} * v_dim});
  std::vector<float> mix(static_cast<size_t>(t) * latent), o(static_cast<size_t>(t) * v_dim);
  for (int h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(mix.data() + i * latent, out_latent.row(i) + int64_t{h} * latent,
                  sizeof(float) * latent);
    const float* w_uv = kv_b_.row(h * uk_uv_rows + nope);  // [v, kv_lora_rank]
    cpu::linear(mix.data(), t, latent, w_uv, v_dim, nullptr, o.data());
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(attn.row(i) + int64_t{h} * v_dim, o.data() + i * v_dim, sizeof(float) * v_dim);
  }
  return o_proj_.forward(attn);
}

}  // namespace strata
