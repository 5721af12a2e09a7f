#include "layers/mamba2.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cache/state_pool.h"
#include "core/error.h"

namespace strata {

Mamba2Options mamba2_options_from_config(const ModelConfig& c, const Mamba2ConfigKeys& k,
                                         int layer_id) {
  Mamba2Options o;
  o.layer_id = layer_id;
  o.hidden_size = c.hidden_size;
  o.num_heads = c.require_int(k.num_heads);
  o.head_dim = c.require_int(k.head_dim);
  o.n_groups = c.get_int(k.n_groups, 1);
  o.state_size = c.require_int(k.state_size);
  o.conv_kernel = c.get_int(k.conv_kernel, 4);
  o.chunk_size = c.get_int(k.chunk_size, 256);
  o.conv_bias = c.get_bool(k.conv_bias, true);
  o.proj_bias = c.get_bool(k.proj_bias, false);
  o.norm_eps = static_cast<float>(c.rms_norm_eps);
  if (c.raw.contains("time_step_limit") && c.raw["time_step_limit"].is_array() &&
      c.raw["time_step_limit"].size() == 2) {
    const json limit = {{"lo", c.raw["time_step_limit"][0]}, {"hi", c.raw["time_step_limit"][1]}};
    if (auto lo = json_number(limit, "lo")) o.dt_min = static_cast<float>(*lo);
    if (auto hi = json_number(limit, "hi")) o.dt_max = static_cast<float>(*hi);
  }
  if (o.num_heads <= 0 || o.head_dim <= 0 || o.state_size <= 0 || o.n_groups <= 0 ||
      o.num_heads % o.n_groups != 0)
    fail(
        "config.json: Mamba2 needs positive {} ({}), {} ({}), {} ({}) and {} ({}) dividing the "
        "heads",
        k.num_heads, o.num_heads, k.head_dim, o.head_dim, k.state_size, o.state_size, k.n_groups,
        o.n_groups);
  if (o.conv_kernel < 2)
    fail("config.json: {} must be at least 2, got {}", k.conv_kernel, o.conv_kernel);
  if (o.chunk_size < 1)
    fail("config.json: {} must be positive, got {}", k.chunk_size, o.chunk_size);
  return o;
}

Mamba2Mixer::Mamba2Mixer(ParamLoader& w, const std::string& prefix, const Mamba2Options& opt)
    : opt_(opt) {
  const int64_t I = opt.intermediate(), conv_dim = opt.conv_dim(), H = opt.num_heads;
  if (opt.activation != "silu" && opt.activation != "swish")
    fail("config.json: Mamba2 activation '{}' is not supported (supported: silu)", opt.activation);
  if (opt.gated_norm && (opt.norm_groups <= 0 || I % opt.norm_groups != 0))
    fail("config.json: the Mamba2 norm's {} groups do not divide its width {}", opt.norm_groups, I);
  if (!opt.in_proj_scale.empty() &&
      static_cast<int64_t>(opt.in_proj_scale.size()) != opt.in_proj_width())
    fail("Mamba2 layer {}: {} in_proj multipliers for {} columns", opt.layer_id,
         opt.in_proj_scale.size(), opt.in_proj_width());
  in_proj_ = Linear::load(w, prefix + "." + opt.in_proj, opt.hidden_size, opt.in_proj_width(),
                          opt.proj_bias);
  out_proj_ = Linear::load(w, prefix + "." + opt.out_proj, I, opt.hidden_size, opt.out_proj_bias);
  // The checkpoint's conv weight is [conv_dim, 1, kernel]: one filter per channel.
  conv_weight_ =
      w.upload(w.host(prefix + "." + opt.conv1d + ".weight", {conv_dim, 1, opt.conv_kernel})
                   .reshaped({conv_dim, opt.conv_kernel}),
               DType::F32);
  if (opt.conv_bias) conv_bias_ = w.vector(prefix + "." + opt.conv1d + ".bias", conv_dim);
  Tensor a = w.host(prefix + ".A_log", {H}).clone();  // the loaded tensor may map the file
  for (int64_t h = 0; h < H; ++h) a.data()[h] = -std::exp(a.data()[h]);
  ssm_.num_heads = opt.num_heads;
  ssm_.head_dim = opt.head_dim;
  ssm_.n_groups = opt.n_groups;
  ssm_.state_size = opt.state_size;
  ssm_.chunk_size = opt.chunk_size;
  ssm_.dt_min = opt.dt_min;
  ssm_.dt_max = opt.dt_max;
  ssm_.A = w.upload(a, DType::F32);
  ssm_.D = w.vector(prefix + ".D", H);
  ssm_.dt_bias = w.vector(prefix + ".dt_bias", H);
  if (opt.gated_norm) norm_weight_ = w.vector(prefix + "." + opt.norm + ".weight", I);
  if (!opt.in_proj_scale.empty()) {
    Tensor scale({opt.in_proj_width()});
    std::copy(opt.in_proj_scale.begin(), opt.in_proj_scale.end(), scale.data());
    in_proj_scale_ = w.upload(scale, DType::F32);
  }
}

RecurrentStateLayout Mamba2Mixer::state_layout() const {
  RecurrentStateLayout l;
  l.kind = RecurrentKind::Mamba2;
  l.conv_channels = opt_.conv_dim();
  l.conv_width = opt_.conv_kernel - 1;
  l.num_heads = opt_.num_heads;
  l.head_dim = opt_.head_dim;
  l.state_size = opt_.state_size;
  return l;
}

Tensor Mamba2Mixer::forward(const Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) const {
  STRATA_CHECK(ctx.recurrent_state != nullptr, "layer {} is Mamba2 but no state pool is set",
               opt_.layer_id);
  Ops& ops = *ctx.ops;
  StatePool& pool = *ctx.recurrent_state;
  const RecurrentStateLayout& layout = pool.layout(opt_.layer_id);
  STRATA_CHECK(
      layout.conv_channels == opt_.conv_dim() && layout.ssm_numel() == state_layout().ssm_numel(),
      "layer {}: pool layout {}", opt_.layer_id, layout.describe());
  STRATA_CHECK(ctx.state_seqs.rows() == batch.batch_size(), "{} state seqs for {} requests",
               ctx.state_seqs.rows(), batch.batch_size());
  const int64_t T = x.dim(0), I = opt_.intermediate(), conv_dim = opt_.conv_dim();

  // [z | xBC | dt] = in_proj(x * input_scale) * in_proj_scale
  Tensor proj;
  if (opt_.input_scale != 1.0f) {
    Tensor scaled = ops.empty({T, x.cols()}, x.dtype());
    ops.copy(x, scaled);
    ops.scale(scaled, opt_.input_scale);
    proj = in_proj_.forward(ops, scaled);
  } else {
    proj = in_proj_.forward(ops, x);
  }
  if (!in_proj_scale_.empty()) ops.scale_columns(proj, in_proj_scale_);
  const Tensor z = proj.slice_cols(0, I);
  const Tensor xbc_in = proj.slice_cols(I, conv_dim);
  const Tensor dt = proj.slice_cols(I + conv_dim, opt_.num_heads);

  Tensor xbc = ops.empty({T, conv_dim});
  ops.causal_conv1d(xbc_in, conv_weight_, opt_.conv_bias ? &conv_bias_ : nullptr, true,
                    ctx.state_seqs, pool.conv(opt_.layer_id), xbc);
  Tensor y = ops.empty({T, I});
  ops.ssm_scan(xbc, dt, ssm_, ctx.state_seqs, batch.mode == ForwardMode::Decode,
               pool.ssm(opt_.layer_id), y);
  Tensor normed = ops.empty_activation({T, I});
  ops.gated_rms_norm(y, z, opt_.gated_norm ? &norm_weight_ : nullptr, opt_.norm_groups,
                     opt_.norm_eps, opt_.norm_before_gate, normed);
  return out_proj_.forward(ops, normed);
}

}  // namespace strata
