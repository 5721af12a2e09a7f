// Llama:  h = x + Attn(RMSNorm(x));  out = h + MLP(RMSNorm(h))
//         Attn = o_proj . softmax(rope(q) rope(k)^T / sqrt(d)) v      (GQA, causal)
//         MLP  = down_proj . (silu(gate_proj x) * up_proj x)
#include "models/llama.h"

#include <fmt/format.h>

#include "layers/attention.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

class LlamaDecoderLayer : public DecoderLayer {
 public:
  LlamaDecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id, const LlamaVariant& variant)
      : attn_(w, fmt::format("model.layers.{}.self_attn", layer_id),
              attention_options(c, layer_id, variant)),
        mlp_(w, fmt::format("model.layers.{}.mlp", layer_id), c.hidden_size, c.intermediate_size,
             parse_activation(c.hidden_act), c.mlp_bias) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps);
    post_attention_norm_ =
        RMSNorm::load(w, p + "post_attention_layernorm.weight", c.hidden_size, eps);
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    attn_.forward(input_norm_.forward(ops, x), x, batch, ctx);
    mlp_.forward(ops, post_attention_norm_.forward(ops, x), x);
  }

  std::optional<KVLayerLayout> kv_layout() const override { return attn_.kv_layout(); }

 private:
  static AttentionOptions attention_options(const ModelConfig& c, int layer_id,
                                            const LlamaVariant& v) {
    AttentionOptions o = attention_options_from_config(c, layer_id);
    o.qkv_bias = v.qkv_bias || c.attention_bias;  // Qwen2 has q|k|v bias without o bias
    o.qk_norm = v.qk_norm;
    return o;
  }

  GQAAttention attn_;
  GatedMLP mlp_;
  RMSNorm input_norm_, post_attention_norm_;
};

}  // namespace

std::unique_ptr<CausalLM> build_llama_family(const ModelConfig& config, ParamLoader& weights,
                                             const StagePlan& stage, const LlamaVariant& variant) {
  if (config.intermediate_size <= 0) config.require_int("intermediate_size");
  return std::make_unique<DecoderModel>(config, weights, stage, [&](int layer_id) {
    return std::make_unique<LlamaDecoderLayer>(config, weights, layer_id, variant);
  });
}

}  // namespace strata
