// Gemma 3 (text): a Llama-shaped decoder with four differences, all from the checkpoint:
//   h   = x + PostAttnNorm(Attn(InputNorm(x)))
//   out = h + PostFfnNorm(MLP(PreFfnNorm(h)))
//   every RMSNorm multiplies by (1 + w); q and k get such a norm per head before rope;
//   Attn scales scores by query_pre_attn_scalar^-1/2; sliding layers (layer_types, or every
//   layer but each sliding_window_pattern-th) rotate with their own base (rope_local_base_freq);
//   MLP = down(gelu_tanh(gate x) * up x);  the embedding is scaled by sqrt(hidden_size).
#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "layers/attention.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

constexpr float kGemmaNormOffset = 1.0f;  // Gemma stores w - 1: the norm multiplies by (1 + w)

class Gemma3DecoderLayer : public DecoderLayer {
 public:
  Gemma3DecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id)
      : attn_(w, fmt::format("model.layers.{}.self_attn", layer_id),
              attention_options(c, layer_id)),
        mlp_(w, fmt::format("model.layers.{}.mlp", layer_id), c.hidden_size, c.intermediate_size,
             parse_activation(c.hidden_act, "hidden_activation")) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    const auto norm = [&](const char* name) {
      return RMSNorm::load(w, p + name + ".weight", c.hidden_size, eps, kGemmaNormOffset);
    };
    input_norm_ = norm("input_layernorm");
    post_attention_norm_ = norm("post_attention_layernorm");
    pre_feedforward_norm_ = norm("pre_feedforward_layernorm");
    post_feedforward_norm_ = norm("post_feedforward_layernorm");
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    Tensor attn = attn_.forward(input_norm_.forward(ops, x), batch, ctx);
    post_attention_norm_.forward_into(ops, attn, attn);
    ops.add(x, attn);
    Tensor mlp = mlp_.forward(ops, pre_feedforward_norm_.forward(ops, x));
    post_feedforward_norm_.forward_into(ops, mlp, mlp);
    ops.add(x, mlp);
  }

  std::optional<KVLayerLayout> kv_layout() const override { return attn_.kv_layout(); }

 private:
  static AttentionOptions attention_options(const ModelConfig& c, int layer_id) {
    AttentionOptions o = attention_options_from_config(c, layer_id);
    o.qk_norm = true;
    o.norm_weight_offset = kGemmaNormOffset;
    o.scale = 1.0f / std::sqrt(static_cast<float>(c.require_number("query_pre_attn_scalar")));
    o.logit_softcap = static_cast<float>(c.get_number("attn_logit_softcapping", 0.0));
    return o;
  }

  GQAAttention attn_;
  GatedMLP mlp_;
  RMSNorm input_norm_, post_attention_norm_, pre_feedforward_norm_, post_feedforward_norm_;
};

}  // namespace

std::unique_ptr<CausalLM> build_gemma3(const ModelConfig& c, ParamLoader& w, const StagePlan& s) {
  if (c.intermediate_size <= 0) c.require_int("intermediate_size");
  if (c.require_number("query_pre_attn_scalar") <= 0)
    fail("config.json: query_pre_attn_scalar must be positive, got {}; fix config.json",
         c.get_number("query_pre_attn_scalar", 0));
  if (c.get_number("attn_logit_softcapping", 0.0) < 0)
    fail("config.json: attn_logit_softcapping must be positive or null, got {}",
         c.get_number("attn_logit_softcapping", 0.0));
  if (c.get_number("final_logit_softcapping", 0.0) != 0.0)
    fail(
        "config.json: final_logit_softcapping {} is not supported (Gemma 3 checkpoints leave it "
        "null): set it to null",
        c.get_number("final_logit_softcapping", 0.0));
  DecoderNames names;
  names.norm_weight_offset = kGemmaNormOffset;
  names.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
  return std::make_unique<DecoderModel>(
      c, w, s, [&](int layer_id) { return std::make_unique<Gemma3DecoderLayer>(c, w, layer_id); },
      names);
}

}  // namespace strata
