#include "layers/mamba2.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cache/state_pool.h"
#include "core/error.h"
#include "layers/row_sections.h"

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

// Tensor parallelism splits the mixer by heads: a rank holds its heads' z, x, dt, A, D and
// dt_bias, the B and C groups those heads read (split like KV heads, or replicated when there
// are fewer groups than ranks), their conv channels and norm columns, and its state; out_proj
// sums the heads' parts. A gated norm over groups wider than a rank's heads (one group over the
// whole width: Bamba) takes the RMS of every rank's columns: each rank's sums of squares are
// all-reduced before it normalizes its part (norm_ranks_).
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
  Communicator& group = w.tensor_parallel();
  const int tp = group.size();
  const bool split = tp > 1 && H % tp == 0 && (opt.n_groups % tp == 0 || tp % opt.n_groups == 0) &&
                     (!opt.gated_norm || opt.norm_groups % tp == 0 || tp % opt.norm_groups == 0);
  const Shard heads = split ? Shard{group.rank(), tp} : Shard{};
  const Shard groups = split ? head_group_shard(opt.n_groups, group.rank(), tp) : Shard{};
  opt_.num_heads = static_cast<int>(heads.size(H));
  opt_.n_groups = static_cast<int>(groups.size(opt.n_groups));
  if (split && opt.gated_norm && opt.norm_groups % tp == 0) {
    opt_.norm_groups = opt.norm_groups / tp;
  } else if (split && opt.gated_norm) {  // tp / norm_groups ranks share each group
    opt_.norm_groups = 1;
    norm_groups_total_ = opt.norm_groups;
    norm_group_ = group.rank() / (tp / opt.norm_groups);
    norm_group_width_ = I / opt.norm_groups;
    norm_ranks_ = &group;
  }
  // This rank's rows of z | x | B | C | dt, and of the conv channels x | B | C.
  const int64_t hd = opt.head_dim, gn = opt.state_size, GN = int64_t{opt.n_groups} * gn;
  const RowSection x{0, heads.begin(H) * hd, heads.size(H) * hd},
      b{I, groups.begin(opt.n_groups) * gn, groups.size(opt.n_groups) * gn},
      c{I + GN, b.begin, b.size};
  auto shifted = [](RowSection s, int64_t by) {
    return RowSection{s.offset + by, s.begin, s.size};
  };
  // (Whole, the sections cover every row in order.)
  const std::vector<RowSection> conv_rows = {x, b, c};
  const std::vector<RowSection> proj_rows = {x,
                                             shifted(x, I),
                                             shifted(b, I),
                                             shifted(c, I),
                                             {I + conv_dim, heads.begin(H), heads.size(H)}};

  const std::string in_name = prefix + "." + opt.in_proj;
  if (split) {
    in_proj_ = Linear::from_tensors(
        w.upload_matrix(
            pick_rows(w.host(in_name + ".weight", {opt.in_proj_width(), opt.hidden_size}),
                      opt.hidden_size, proj_rows)),
        opt.proj_bias
            ? w.upload(pick_rows(w.host(in_name + ".bias", {opt.in_proj_width()}), 1, proj_rows),
                       DType::F32)
            : Tensor{});
  } else {
    in_proj_ = Linear::load(w, in_name, opt.hidden_size, opt.in_proj_width(), opt.proj_bias);
  }
  out_proj_ =
      split ? Linear::load_row_parallel(w, prefix + "." + opt.out_proj, I, opt.hidden_size,
                                        opt.out_proj_bias)
            : Linear::load(w, prefix + "." + opt.out_proj, I, opt.hidden_size, opt.out_proj_bias);
  // The checkpoint's conv weight is [conv_dim, 1, kernel]: one filter per channel.
  const Tensor conv = w.host(prefix + "." + opt.conv1d + ".weight", {conv_dim, 1, opt.conv_kernel});
  conv_weight_ = w.upload(
      pick_rows(conv, opt.conv_kernel, conv_rows).reshaped({opt_.conv_dim(), opt.conv_kernel}),
      DType::F32);
  if (opt.conv_bias)
    conv_bias_ =
        w.upload(pick_rows(w.host(prefix + "." + opt.conv1d + ".bias", {conv_dim}), 1, conv_rows),
                 DType::F32);
  Tensor a = w.host(prefix + ".A_log", {H}).clone();  // the loaded tensor may map the file
  for (int64_t h = 0; h < H; ++h) a.data()[h] = -std::exp(a.data()[h]);
  ssm_.num_heads = opt_.num_heads;
  ssm_.head_dim = opt.head_dim;
  ssm_.n_groups = opt_.n_groups;
  ssm_.state_size = opt.state_size;
  ssm_.chunk_size = opt.chunk_size;
  ssm_.dt_min = opt.dt_min;
  ssm_.dt_max = opt.dt_max;
  const std::vector<RowSection> head_rows = {{0, heads.begin(H), heads.size(H)}};
  ssm_.A = w.upload(pick_rows(a, 1, head_rows), DType::F32);
  ssm_.D = w.vector(prefix + ".D", H, heads);
  ssm_.dt_bias = w.vector(prefix + ".dt_bias", H, heads);
  if (opt.gated_norm) norm_weight_ = w.vector(prefix + "." + opt.norm + ".weight", I, heads);
  if (!opt.in_proj_scale.empty()) {
    // (Whole, the sections cover every column in order.)
    const Tensor whole =
        Tensor::view(const_cast<float*>(opt.in_proj_scale.data()), {opt.in_proj_width()});
    in_proj_scale_ = w.upload(pick_rows(whole, 1, proj_rows), DType::F32);
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
  if (!norm_ranks_) {
    ops.gated_rms_norm(y, z, opt_.gated_norm ? &norm_weight_ : nullptr, opt_.norm_groups,
                       opt_.norm_eps, opt_.norm_before_gate, normed, {});
    return out_proj_.forward(ops, normed);
  }
  // This rank holds a part of one norm group: its sum of squares goes in the group's column,
  // zeros elsewhere, and the all-reduce gives every rank every group's whole sum.
  Tensor sums = ops.empty({T, norm_groups_total_});
  ops.fill(sums, 0.0f);
  Tensor mine = sums.slice_cols(norm_group_, 1);
  ops.gated_sum_squares(y, z, 1, opt_.norm_before_gate, mine);
  norm_ranks_->all_reduce_sum(sums);
  ops.gated_rms_norm(y, z, &norm_weight_, 1, opt_.norm_eps, opt_.norm_before_gate, normed,
                     {&mine, norm_group_width_});
  return out_proj_.forward(ops, normed);
}

}  // namespace strata
