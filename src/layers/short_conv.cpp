#include "layers/short_conv.h"

#include "cache/state_pool.h"
#include "core/error.h"

namespace strata {

ShortConvMixer::ShortConvMixer(ParamLoader& w, const std::string& prefix,
                               const ShortConvOptions& opt)
    : opt_(opt) {
  const int64_t H = opt.hidden_size;
  if (opt.kernel < 2)
    fail("config.json: conv_L_cache must be at least 2 (the short conv's kernel), got {}",
         opt.kernel);
  in_proj_ = Linear::load(w, prefix + ".in_proj", H, 3 * H, opt.bias);
  out_proj_ = Linear::load(w, prefix + ".out_proj", H, H, opt.bias);
  // The checkpoint's conv weight is [hidden, 1, kernel]: one filter per channel.
  conv_weight_ = w.upload(
      w.host(prefix + ".conv.weight", {H, 1, opt.kernel}).reshaped({H, opt.kernel}), DType::F32);
  if (opt.bias) conv_bias_ = w.vector(prefix + ".conv.bias", H);
}

RecurrentStateLayout ShortConvMixer::state_layout() const {
  RecurrentStateLayout l;
  l.kind = RecurrentKind::ShortConv;
  l.conv_channels = opt_.hidden_size;
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
  STRATA_CHECK(layout.kind == RecurrentKind::ShortConv &&
                   layout.conv_channels == opt_.hidden_size && layout.conv_width == opt_.kernel - 1,
               "layer {}: pool layout {}", opt_.layer_id, layout.describe());
  STRATA_CHECK(ctx.state_seqs.rows() == batch.batch_size(), "{} state seqs for {} requests",
               ctx.state_seqs.rows(), batch.batch_size());
  const int64_t T = x.dim(0), H = opt_.hidden_size;
  const Tensor proj = in_proj_.forward(ops, x);  // [B | C | x]
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
