// Qwen3-Next: a hybrid of Gated DeltaNet layers (layers/gated_delta_net.h) and gated full
// attention, as `layer_types` says (layer_kinds.cpp):
//   h = x + Mixer(RMSNorm(x));   out = h + MoE(RMSNorm(h))   (dense SwiGLU in mlp_only_layers)
// Every RMSNorm of the decoder (layer norms, q/k norms, the final norm) scales by (1 + w);
// the DeltaNet's gated output norm by w. Attention: q_proj also makes a per-head output gate,
// q/k norms per head, partial rotary (partial_rotary_factor). MoE: softmax top-k router
// (norm_topk_prob), SwiGLU experts, one shared expert scaled by sigmoid(x . shared_expert_gate).
#include <fmt/format.h>

#include "core/error.h"
#include "layers/attention.h"
#include "layers/gated_delta_net.h"
#include "layers/moe.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

constexpr float kUnitOffset = 1.0f;  // the (1 + w) norms

class Qwen3NextDecoderLayer : public DecoderLayer {
 public:
  Qwen3NextDecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id) {
    const LayerSpec& spec = c.layers[layer_id];
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps, kUnitOffset);
    post_attention_norm_ =
        RMSNorm::load(w, p + "post_attention_layernorm.weight", c.hidden_size, eps, kUnitOffset);
    if (spec.recurrent == RecurrentKind::GatedDeltaNet) {
      delta_.emplace(w, p + "linear_attn", gated_delta_net_options(c, layer_id));
    } else {
      AttentionOptions o = attention_options_from_config(c, layer_id);
      o.qk_norm = true;
      o.norm_weight_offset = kUnitOffset;
      o.output_gate = true;
      attn_.emplace(w, p + "self_attn", o);
    }
    if (spec.mlp == MlpKind::MoE)
      moe_.emplace(w, p + "mlp", moe_options(c));
    else
      mlp_.emplace(w, p + "mlp", c.hidden_size, c.require_int("intermediate_size"),
                   parse_activation(c.hidden_act));
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    const Tensor h = input_norm_.forward(ops, x);
    if (delta_)
      delta_->forward(h, x, batch, ctx);
    else
      attn_->forward(h, x, batch, ctx);
    const Tensor m = post_attention_norm_.forward(ops, x);
    if (moe_)
      moe_->forward(ops, m, x);
    else
      mlp_->forward(ops, m, x);
  }

  std::optional<KVLayerLayout> kv_layout() const override {
    return attn_ ? std::optional(attn_->kv_layout()) : std::nullopt;
  }
  std::optional<RecurrentStateLayout> state_layout() const override {
    return delta_ ? std::optional(delta_->state_layout()) : std::nullopt;
  }

 private:
  static MoEOptions moe_options(const ModelConfig& c) {
    MoEOptions m;
    m.hidden_size = c.hidden_size;
    RouterConfig& r = m.router;
    r.num_experts = c.require_int("num_experts");
    r.top_k = c.require_int("num_experts_per_tok");
    r.scoring = RouterScoring::Softmax;
    r.normalize_topk = c.get_bool("norm_topk_prob", true);
    r.validate();
    const Activation act = parse_activation(c.hidden_act);
    m.expert = {c.require_int("moe_intermediate_size"), true, act, false};
    const int shared = c.get_int("shared_expert_intermediate_size", 0);
    if (shared > 0) {
      m.shared = "shared_expert";
      m.shared_expert = {shared, true, act, false};
      m.shared_gate = "shared_expert_gate";
    }
    return m;
  }

  RMSNorm input_norm_, post_attention_norm_;
  std::optional<GatedDeltaNetMixer> delta_;
  std::optional<GQAAttention> attn_;
  std::optional<MoELayer> moe_;
  std::optional<GatedMLP> mlp_;
};

}  // namespace

std::unique_ptr<CausalLM> build_qwen3_next(const ModelConfig& config, ParamLoader& weights,
                                           const StagePlan& stage) {
  DecoderNames names;
  names.norm_weight_offset = kUnitOffset;
  return std::make_unique<DecoderModel>(
      config, weights, stage,
      [&](int layer_id) {
        return std::make_unique<Qwen3NextDecoderLayer>(config, weights, layer_id);
      },
      names);
}

}  // namespace strata
