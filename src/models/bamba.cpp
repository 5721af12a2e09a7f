// Bamba (IBM): a Llama-style decoder whose token mixer is Mamba2 except in the layers listed in
// `attn_layer_indices`, which use rotary GQA attention (partial rotary allowed):
//   h = x + Mixer(RMSNorm(x));   out = h + SwiGLU(RMSNorm(h))
// The Mamba2 output norm is one RMSNorm over the full width (not grouped).
#include <fmt/format.h>

#include "core/error.h"
#include "layers/attention.h"
#include "layers/mamba2.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

class BambaDecoderLayer : public DecoderLayer {
 public:
  BambaDecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id)
      : mlp_(w, fmt::format("model.layers.{}.feed_forward", layer_id), c.hidden_size,
             c.intermediate_size, parse_activation(c.hidden_act), c.mlp_bias) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps);
    pre_ff_norm_ = RMSNorm::load(w, p + "pre_ff_layernorm.weight", c.hidden_size, eps);
    if (c.layers[layer_id].recurrent == RecurrentKind::Mamba2)
      mamba_.emplace(w, p + "mamba", mamba_options(c, layer_id));
    else
      attn_.emplace(w, p + "self_attn", attention_options_from_config(c, layer_id));
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    const Tensor h = input_norm_.forward(ops, x);
    if (mamba_)
      ops.add(x, mamba_->forward(h, batch, ctx));
    else
      attn_->forward(h, x, batch, ctx);
    mlp_.forward(ops, pre_ff_norm_.forward(ops, x), x);
  }

  std::optional<KVLayerLayout> kv_layout() const override {
    return attn_ ? std::optional(attn_->kv_layout()) : std::nullopt;
  }
  std::optional<RecurrentStateLayout> state_layout() const override {
    return mamba_ ? std::optional(mamba_->state_layout()) : std::nullopt;
  }

 private:
  static Mamba2Options mamba_options(const ModelConfig& c, int layer_id) {
    Mamba2Options o = mamba2_options_from_config(
        c,
        {"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv",
         "mamba_chunk_size", "mamba_conv_bias", "mamba_proj_bias"},
        layer_id);
    o.out_proj_bias = o.proj_bias;
    o.activation = c.hidden_act;
    const int expanded = static_cast<int>(c.get_number("mamba_expand", 2) * c.hidden_size);
    if (expanded != o.intermediate())
      fail("config.json: mamba_expand x hidden_size = {} but mamba_n_heads x mamba_d_head = {}",
           expanded, o.intermediate());
    o.norm_groups = 1;
    return o;
  }

  RMSNorm input_norm_, pre_ff_norm_;
  std::optional<Mamba2Mixer> mamba_;
  std::optional<GQAAttention> attn_;
  GatedMLP mlp_;
};

}  // namespace

std::unique_ptr<CausalLM> build_bamba(const ModelConfig& config, ParamLoader& weights,
                                      const StagePlan& stage) {
  if (config.intermediate_size <= 0) config.require_int("intermediate_size");
  DecoderNames names;
  names.final_norm = "model.final_layernorm.weight";
  return std::make_unique<DecoderModel>(
      config, weights, stage,
      [&](int layer_id) { return std::make_unique<BambaDecoderLayer>(config, weights, layer_id); },
      names);
}

}  // namespace strata
