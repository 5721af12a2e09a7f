#include "layers/mamba2.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cache/state_pool.h"
#include "core/error.h"
#include "kernels/cpu/mamba.h"
#include "kernels/cpu/ops.h"

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
  Tensor conv = w.host(prefix + "." + opt.conv1d + ".weight", {conv_dim, 1, opt.conv_kernel});
  conv_weight_ = Tensor({conv_dim, opt.conv_kernel});
  std::memcpy(conv_weight_.data(), conv.data(), sizeof(float) * conv.numel());
  if (opt.conv_bias) conv_bias_ = w.host(prefix + "." + opt.conv1d + ".bias", {conv_dim});
  Tensor a_log = w.host(prefix + ".A_log", {H});
  A_ = Tensor({H});
  for (int64_t h = 0; h < H; ++h) A_.data()[h] = -std::exp(a_log.data()[h]);
  D_ = w.host(prefix + ".D", {H});
  dt_bias_ = w.host(prefix + ".dt_bias", {H});
  if (opt.gated_norm) norm_weight_ = w.host(prefix + "." + opt.norm + ".weight", {I});
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
  // The scan and conv kernels exist on the CPU only so far; the capability table refuses
  // hybrid models on other devices before anything loads.
  STRATA_CHECK(ctx.ops->device().is_host(), "layer {}: Mamba2 runs on the CPU only", opt_.layer_id);
  Ops& ops = *ctx.ops;
  StatePool& pool = *ctx.recurrent_state;
  const RecurrentStateLayout& layout = pool.layout(opt_.layer_id);
  STRATA_CHECK(
      layout.conv_channels == opt_.conv_dim() && layout.ssm_numel() == state_layout().ssm_numel(),
      "layer {}: pool layout {}", opt_.layer_id, layout.describe());
  const int64_t T = x.dim(0), I = opt_.intermediate(), H = opt_.num_heads,
                width = opt_.in_proj_width();

  Tensor proj;
  if (opt_.input_scale != 1.0f) {
    Tensor scaled = x.clone();
    for (int64_t i = 0; i < scaled.numel(); ++i) scaled.data()[i] *= opt_.input_scale;
    proj = in_proj_.forward(ops, scaled);
  } else {
    proj = in_proj_.forward(ops, x);
  }
  if (!opt_.in_proj_scale.empty())
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < width; ++c) proj.row(t)[c] *= opt_.in_proj_scale[c];

  // dt = clamp(softplus(dt + dt_bias)) for every token and head.
  Tensor dt({T, H});
  for (int64_t t = 0; t < T; ++t) {
    const float* raw = proj.row(t) + I + opt_.conv_dim();
    for (int64_t h = 0; h < H; ++h)
      dt.row(t)[h] =
          std::clamp(cpu::softplus(raw[h] + dt_bias_.data()[h]), opt_.dt_min, opt_.dt_max);
  }

  Tensor xbc({T, opt_.conv_dim()}), y({T, I});
  std::vector<float> scratch;
  const auto offsets = batch.token_offsets();
  for (int b = 0; b < batch.batch_size(); ++b) {
    const int begin = offsets[b], len = batch.extend_lens[b];
    if (len == 0) continue;
    const int slot = batch.state_slots.at(b);
    // A request with nothing cached starts from the zero state, whatever the slot held before.
    const bool fresh = batch.prefix_lens[b] == 0;
    float* conv_state = pool.conv_state(opt_.layer_id, slot);
    if (fresh) std::fill_n(conv_state, layout.conv_numel(), 0.0f);
    cpu::causal_conv1d(proj.row(begin) + I, width, len, opt_.conv_dim(), conv_weight_.data(),
                       opt_.conv_bias ? conv_bias_.data() : nullptr, opt_.conv_kernel, conv_state,
                       xbc.row(begin), true);

    float* ssm = pool.ssm_state_f32(opt_.layer_id, slot);
    if (!ssm) {  // stored in a narrower dtype: scan in f32, store back rounded
      scratch.resize(layout.ssm_numel());
      pool.read_ssm(opt_.layer_id, slot, scratch.data());
      ssm = scratch.data();
    }
    if (fresh) std::fill_n(ssm, layout.ssm_numel(), 0.0f);
    cpu::SsmScanArgs args;
    args.num_heads = opt_.num_heads;
    args.head_dim = opt_.head_dim;
    args.n_groups = opt_.n_groups;
    args.state_size = opt_.state_size;
    args.len = len;
    args.x = xbc.row(begin);
    args.B = args.x + I;
    args.C = args.B + int64_t{opt_.n_groups} * opt_.state_size;
    args.stride = opt_.conv_dim();
    args.dt = dt.row(begin);
    args.A = A_.data();
    args.D = D_.data();
    if (batch.mode == ForwardMode::Decode)
      cpu::ssm_scan_sequential(args, ssm, y.row(begin));
    else
      cpu::ssm_scan_chunked(args, opt_.chunk_size, ssm, y.row(begin));
    if (ssm == scratch.data()) pool.write_ssm(opt_.layer_id, slot, ssm);
  }

  cpu::gated_rms_norm(y.data(), proj.data(), width, T, static_cast<int>(I), opt_.norm_groups,
                      opt_.gated_norm ? norm_weight_.data() : nullptr, opt_.norm_eps,
                      opt_.norm_before_gate);
  return out_proj_.forward(ops, y);
}

}  // namespace strata
