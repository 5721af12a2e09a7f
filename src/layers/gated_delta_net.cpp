#include "layers/gated_delta_net.h"

#include <algorithm>
#include <cmath>

#include "cache/state_pool.h"
#include "core/error.h"
#include "layers/row_sections.h"

namespace strata {

GatedDeltaNetOptions gated_delta_net_options(const ModelConfig& c, int layer_id) {
  GatedDeltaNetOptions o;
  o.layer_id = layer_id;
  o.hidden_size = c.hidden_size;
  o.num_k_heads = c.require_int("linear_num_key_heads");
  o.num_v_heads = c.require_int("linear_num_value_heads");
  o.k_dim = c.require_int("linear_key_head_dim");
  o.v_dim = c.require_int("linear_value_head_dim");
  o.conv_kernel = c.get_int("linear_conv_kernel_dim", 4);
  o.norm_eps = static_cast<float>(c.rms_norm_eps);
  if (o.num_v_heads % o.num_k_heads != 0)
    fail("config.json: linear_num_value_heads {} must be a multiple of linear_num_key_heads {}",
         o.num_v_heads, o.num_k_heads);
  if (o.conv_kernel < 2)
    fail("config.json: linear_conv_kernel_dim must be at least 2, got {}", o.conv_kernel);
  const std::string act = c.hidden_act;
  if (act != "silu" && act != "swish")
    fail("config.json: hidden_act '{}' is not supported for the Gated DeltaNet conv (use silu)",
         act);
  return o;
}

// Tensor parallelism splits the mixer by key heads, each with the r value heads that read it:
// a rank holds their q, k, v, z, b, a rows, conv channels, decay parameters, norm and state;
// out_proj sums the value heads' parts. Key heads that do not split evenly stay whole.
GatedDeltaNetMixer::GatedDeltaNetMixer(ParamLoader& w, const std::string& prefix,
                                       const GatedDeltaNetOptions& opt)
    : opt_(opt) {
  const int64_t H = opt.hidden_size, dk = opt.k_dim, dv = opt.v_dim, HK = opt.num_k_heads,
                HV = opt.num_v_heads, r = HV / HK;
  const Communicator& tp = w.tensor_parallel();
  const Shard heads = HK % tp.size() == 0 ? Shard{tp.rank(), tp.size()} : Shard{};
  const int64_t first = heads.begin(HK), local = heads.size(HK);
  opt_.num_k_heads = static_cast<int>(local);
  opt_.num_v_heads = static_cast<int>(local * r);
  // The checkpoint interleaves by key head: in_proj_qkvz rows are, per key head, [q (dk) |
  // k (dk) | v (r dv) | z (r dv)], in_proj_ba rows [b (r) | a (r)]. Regrouped here into one
  // projection [q | k | v | z | b | a] so that q | k | v are the conv's contiguous channels.
  const int64_t group = 2 * dk + 2 * r * dv;
  const Tensor qkvz = w.host(prefix + ".in_proj_qkvz.weight", {HK * group, H});
  const Tensor ba = w.host(prefix + ".in_proj_ba.weight", {HK * 2 * r, H});
  Tensor fused({local * group + 2 * local * r, H});
  float* out = fused.data();
  auto take = [&](const Tensor& src, int64_t first_row, int64_t rows) {
    std::copy_n(src.data() + first_row * H, rows * H, out);
    out += rows * H;
  };
  const int64_t end = first + local;
  for (int64_t g = first; g < end; ++g) take(qkvz, g * group, dk);                        // q
  for (int64_t g = first; g < end; ++g) take(qkvz, g * group + dk, dk);                   // k
  for (int64_t g = first; g < end; ++g) take(qkvz, g * group + 2 * dk, r * dv);           // v
  for (int64_t g = first; g < end; ++g) take(qkvz, g * group + 2 * dk + r * dv, r * dv);  // z
  for (int64_t g = first; g < end; ++g) take(ba, g * 2 * r, r);                           // b
  for (int64_t g = first; g < end; ++g) take(ba, g * 2 * r + r, r);                       // a
  in_proj_ = Linear::from_tensors(w.upload_matrix(fused));
  out_proj_ = heads.whole()
                  ? Linear::load(w, prefix + ".out_proj", opt.value_dim(), H, false)
                  : Linear::load_row_parallel(w, prefix + ".out_proj", opt.value_dim(), H, false);
  // The conv's channels q | k | v, this rank's heads of each.
  const RowSection q_rows{0, first * dk, local * dk}, k_rows{HK * dk, q_rows.begin, q_rows.size},
      v_rows{2 * HK * dk, first * r * dv, local * r * dv};
  conv_weight_ =
      w.upload(pick_rows(w.host(prefix + ".conv1d.weight", {opt.conv_dim(), 1, opt.conv_kernel}),
                         opt.conv_kernel, {q_rows, k_rows, v_rows}),
               DType::F32);
  Tensor A = w.host(prefix + ".A_log", {HV}).clone();  // the loaded tensor may map the file
  for (int64_t h = 0; h < HV; ++h) A.data()[h] = -std::exp(A.data()[h]);
  const RowSection v_heads{0, first * r, local * r};
  rule_.num_k_heads = opt_.num_k_heads;
  rule_.num_v_heads = opt_.num_v_heads;
  rule_.k_dim = opt.k_dim;
  rule_.v_dim = opt.v_dim;
  rule_.chunk_size = opt.chunk_size;
  rule_.A = w.upload(pick_rows(A, 1, {v_heads}), DType::F32);
  rule_.dt_bias = w.vector(prefix + ".dt_bias", HV, heads);
  const Tensor norm = w.host(prefix + ".norm.weight", {dv});
  Tensor tiled({local * r * dv});
  for (int64_t h = 0; h < local * r; ++h) std::copy_n(norm.data(), dv, tiled.data() + h * dv);
  norm_weight_ = w.upload(tiled, DType::F32);
}

RecurrentStateLayout GatedDeltaNetMixer::state_layout() const {
  RecurrentStateLayout l;
  l.kind = RecurrentKind::GatedDeltaNet;
  l.conv_channels = opt_.conv_dim();
  l.conv_width = opt_.conv_kernel - 1;
  l.num_heads = opt_.num_v_heads;  // the state of head h: [k_dim, v_dim]
  l.head_dim = opt_.k_dim;
  l.state_size = opt_.v_dim;
  return l;
}

void GatedDeltaNetMixer::forward(const Tensor& x, Tensor& residual, const ForwardBatch& batch,
                                 ForwardContext& ctx) const {
  STRATA_CHECK(ctx.recurrent_state != nullptr,
               "layer {} is a Gated DeltaNet but no state pool is set", opt_.layer_id);
  Ops& ops = *ctx.ops;
  StatePool& pool = *ctx.recurrent_state;
  const RecurrentStateLayout& layout = pool.layout(opt_.layer_id);
  STRATA_CHECK(layout.kind == RecurrentKind::GatedDeltaNet &&
                   layout.conv_channels == opt_.conv_dim() &&
                   layout.ssm_numel() == state_layout().ssm_numel(),
               "layer {}: pool layout {}", opt_.layer_id, layout.describe());
  STRATA_CHECK(ctx.state_seqs.rows() == batch.batch_size(), "{} state seqs for {} requests",
               ctx.state_seqs.rows(), batch.batch_size());
  const int64_t T = x.dim(0), conv_dim = opt_.conv_dim(), V = opt_.value_dim(),
                HV = opt_.num_v_heads;
  const Tensor proj = in_proj_.forward(ops, x);  // [q | k | v | z | b | a]
  Tensor qkv = ops.empty({T, conv_dim});
  ops.causal_conv1d(proj.slice_cols(0, conv_dim), conv_weight_, nullptr, true, ctx.state_seqs,
                    pool.conv(opt_.layer_id), qkv);
  Tensor y = ops.empty({T, V});
  ops.gated_delta_rule(qkv, proj.slice_cols(conv_dim + V, HV),
                       proj.slice_cols(conv_dim + V + HV, HV), rule_, ctx.state_seqs,
                       batch.mode == ForwardMode::Decode, pool.ssm(opt_.layer_id), y);
  Tensor normed = ops.empty_activation({T, V});
  ops.gated_rms_norm(y, proj.slice_cols(conv_dim, V), &norm_weight_, static_cast<int>(HV),
                     opt_.norm_eps, /*norm_before_gate=*/true, normed, {});
  out_proj_.forward_into(ops, normed, residual, true);
}

}  // namespace strata
