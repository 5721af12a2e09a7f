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
  LlamaDecoderLayer(const ModelConfig& c, WeightSource& w, int layer_id,
                    const LlamaVariant& variant)
      : attn_(w, fmt::format("model.layers.{}.self_attn", layer_id),
              attention_options(c, layer_id, variant)),
        mlp_(w, fmt::format("model.layers.{}.mlp", layer_id), c.hidden_size, c.intermediate_size,
             c.hidden_act, c.mlp_bias) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps);
    post_attention_norm_ =
        RMSNorm::load(w, p + "post_attention_layernorm.weight", c.hidden_size, eps);
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Tensor attn_out = attn_.forward(input_norm_.forward(x), batch, ctx);
    add_to(x, attn_out);
    Tensor mlp_out = mlp_.forward(post_attention_norm_.forward(x));
    add_to(x, mlp_out);
  }

  std::optional<KVLayerLayout> kv_layout() const override { return attn_.kv_layout(); }

 private:
  static AttentionOptions attention_options(const ModelConfig& c, int layer_id,
                                            const LlamaVariant& v) {
    AttentionOptions o;
    o.layer_id = layer_id;
    o.hidden_size = c.hidden_size;
    o.num_heads = c.num_attention_heads;
    o.num_kv_heads = c.num_kv_heads;
    o.head_dim = c.head_dim;
    o.qkv_bias = v.qkv_bias || c.attention_bias;
    o.o_bias = c.attention_bias;
    o.qk_norm = v.qk_norm;
    o.norm_eps = static_cast<float>(c.rms_norm_eps);
    o.sliding_window = c.layers[layer_id].sliding_window;
    o.rope = c.rope;
    return o;
  }
  static void add_to(Tensor& x, const Tensor& y) {
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] += y.data()[i];
  }

  GQAAttention attn_;
  GatedMLP mlp_;
  RMSNorm input_norm_, post_attention_norm_;
};

}  // namespace

std::unique_ptr<CausalLM> build_llama_family(const ModelConfig& config, WeightSource& weights,
                                             const StagePlan& stage, const LlamaVariant& variant) {
  if (config.intermediate_size <= 0) config.require_int("intermediate_size");
  return std::make_unique<DecoderModel>(config, weights, stage, [&](int layer_id) {
    return std::make_unique<LlamaDecoderLayer>(config, weights, layer_id, variant);
  });
}

}  // namespace strata
