// LFM2 (Liquid AI): a Llama-style decoder whose token mixer is a short conv (layers/short_conv.h)
// except in the `full_attention` layers of `layer_types`, which use rotary GQA attention with
// per-head q/k RMSNorms:
//   h = x + Mixer(RMSNorm(x));   out = h + SwiGLU(RMSNorm(h))
// The final norm is called embedding_norm; the LM head is tied to the embeddings.
#include <fmt/format.h>

#include "core/error.h"
#include "layers/attention.h"
#include "layers/short_conv.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

// The SwiGLU width: `intermediate_size`, or with block_auto_adjust_ff_dim the Llama-style
// 2/3 of it, times block_ffn_dim_multiplier rounded up to block_multiple_of.
int lfm2_ff_dim(const ModelConfig& c) {
  int ff = c.require_int("intermediate_size");
  if (!c.get_bool("block_auto_adjust_ff_dim", false)) return ff;
  ff = static_cast<int>(2.0 * ff / 3);
  if (c.raw.contains("block_ffn_dim_multiplier") && !c.raw["block_ffn_dim_multiplier"].is_null()) {
    const int multiple = c.get_int("block_multiple_of", 256);
    if (multiple <= 0)
      fail("config.json: block_multiple_of must be positive, got {}; fix config.json", multiple);
    ff = static_cast<int>(c.get_number("block_ffn_dim_multiplier", 1.0) * ff);
    ff = multiple * ((ff + multiple - 1) / multiple);
  }
  if (ff <= 0)
    fail("config.json: the LFM2 feed-forward width from intermediate_size {} is {}",
         c.require_int("intermediate_size"), ff);
  return ff;
}

class Lfm2DecoderLayer : public DecoderLayer {
 public:
  Lfm2DecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id)
      : mlp_(w, fmt::format("model.layers.{}.feed_forward", layer_id), c.hidden_size,
             lfm2_ff_dim(c), Activation::Silu, false, "w1", "w3", "w2") {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    operator_norm_ = RMSNorm::load(w, p + "operator_norm.weight", c.hidden_size, eps);
    ffn_norm_ = RMSNorm::load(w, p + "ffn_norm.weight", c.hidden_size, eps);
    if (c.layers[layer_id].recurrent == RecurrentKind::ShortConv) {
      ShortConvOptions o;
      o.layer_id = layer_id;
      o.hidden_size = c.hidden_size;
      o.kernel = c.get_int("conv_L_cache", 3);
      o.bias = c.get_bool("conv_bias", false);
      conv_.emplace(w, p + "conv", o);
    } else {
      AttentionOptions o = attention_options_from_config(c, layer_id);
      o.qk_norm = true;
      o.q_norm = "q_layernorm";
      o.k_norm = "k_layernorm";
      o.o = "out_proj";
      attn_.emplace(w, p + "self_attn", o);
    }
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    const Tensor h = operator_norm_.forward(ops, x);
    if (conv_)
      conv_->forward(h, x, batch, ctx);
    else
      attn_->forward(h, x, batch, ctx);
    mlp_.forward(ops, ffn_norm_.forward(ops, x), x);
  }

  std::optional<KVLayerLayout> kv_layout() const override {
    return attn_ ? std::optional(attn_->kv_layout()) : std::nullopt;
  }
  std::optional<RecurrentStateLayout> state_layout() const override {
    return conv_ ? std::optional(conv_->state_layout()) : std::nullopt;
  }

 private:
  RMSNorm operator_norm_, ffn_norm_;
  std::optional<ShortConvMixer> conv_;
  std::optional<GQAAttention> attn_;
  GatedMLP mlp_;
};

}  // namespace

std::unique_ptr<CausalLM> build_lfm2(const ModelConfig& config, ParamLoader& weights,
                                     const StagePlan& stage) {
  DecoderNames names;
  names.final_norm = "model.embedding_norm.weight";
  return std::make_unique<DecoderModel>(
      config, weights, stage,
      [&](int layer_id) { return std::make_unique<Lfm2DecoderLayer>(config, weights, layer_id); },
      names);
}

}  // namespace strata
