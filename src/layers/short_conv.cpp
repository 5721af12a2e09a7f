#include "layers/short_conv.h"

#include "cache/state_pool.h"
#include "core/error.h"
#include "layers/row_sections.h"

namespace strata {

ShortConvMixer::ShortConvMixer(ParamLoader& w, const std::string& prefix,
                               const ShortConvOptions& opt)
    : opt_(opt) {
  const int64_t H = opt.hidden_size;
  if (opt.kernel < 2)
    fail("config.json: conv_L_cache must be at least 2 (the short conv's kernel), got {}",
         opt.kernel);
  // Tensor parallelism splits the channels: a rank holds its channels of B, C and x, their
  // filters and conv state; out_proj sums the channels' parts. Channels that do not split
  // evenly stay whole on every rank.
  const Communicator& group = w.tensor_parallel();
  const Shard mine = H % group.size() == 0 ? Shard{group.rank(), group.size()} : Shard{};
  channels_ = mine.size(H);
  if (mine.whole()) {
    in_proj_ = Linear::load(w, prefix + ".in_proj", H, 3 * H, opt.bias);
  } else {
    const RowSection b{0, mine.begin(H), channels_}, c{H, b.begin, b.size},
        x{2 * H, b.begin, b.size};
    in_proj_ = Linear::from_tensors(
        w.upload_matrix(pick_rows(w.host(prefix + ".in_proj.weight", {3 * H, H}), H, {b, c, x})),
        opt.bias ? w.upload(pick_rows(w.host(prefix + ".in_proj.bias", {3 * H}), 1, {b, c, x}),
                            DType::F32)
                 : Tensor{});
  }
  out_proj_ = mine.whole() ? Linear::load(w, prefix + ".out_proj", H, H, opt.bias)
                           : Linear::load_row_parallel(w, prefix + ".out_proj", H, H, opt.bias);
  // The checkpoint's conv weight is [hidden, 1, kernel]: one filter per channel.
  const RowSection own{0, mine.begin(H), channels_};
  conv_weight_ =
      w.upload(pick_rows(w.host(prefix + ".conv.weight", {H, 1, opt.kernel}), opt.kernel, {own}),
               DType::F32);
  if (opt.bias) conv_bias_ = w.vector(prefix + ".conv.bias", H, mine);
}

RecurrentStateLayout ShortConvMixer::state_layout() const {
  RecurrentStateLayout l;
  l.kind = RecurrentKind::ShortConv;
  l.conv_channels = channels_;
  l.conv_width = opt_.kernel - 1;
  return l;  // no SSM state: num_heads 0
}

void ShortConvMixer::forward(const Tensor& x, Tensor& residual, const ForwardBatch& batch,
                             ForwardContext& ctx) const {
  STRATA_CHECK(ctx.recurrent_state != nullptr, "layer {} is a short conv but no state pool is set",
               opt_.layer_id);
  Ops& ops = *ctx.ops;
  StatePool& pool = *ctx.recurrent_state;
  const RecurrentStateLayout& layout = pool.layout(opt_.layer_id);
  STRATA_CHECK(layout.kind == RecurrentKind::ShortConv && layout.conv_channels == channels_ &&
                   layout.conv_width == opt_.kernel - 1,
               "layer {}: pool layout {}", opt_.layer_id, layout.describe());
  STRATA_CHECK(ctx.state_seqs.rows() == batch.batch_size(), "{} state seqs for {} requests",
               ctx.state_seqs.rows(), batch.batch_size());
  const int64_t T = x.dim(0), H = channels_;
  const Tensor proj = in_proj_.forward(ops, x);  // [B | C | x] (this rank's channels)
  Tensor bx = ops.empty({T, H});
  ops.mul(proj.slice_cols(0, H), proj.slice_cols(2 * H, H), false, bx);
  Tensor conv = ops.empty({T, H});
  ops.causal_conv1d(bx, conv_weight_, opt_.bias ? &conv_bias_ : nullptr, false, ctx.state_seqs,
                    pool.conv(opt_.layer_id), conv);
  Tensor gated = ops.empty_activation({T, H});
  ops.mul(proj.slice_cols(H, H), conv, false, gated);
  out_proj_.forward_into(ops, gated, residual, true);
}

}  // namespace strata
