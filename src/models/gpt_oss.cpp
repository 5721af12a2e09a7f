// gpt-oss: pre-norm decoder layers of attention with learned sinks and a mixture of experts.
//   h   = x + Attn(RMSNorm(x));  out = h + MoE(RMSNorm(h))
//   Attn: q|k|v and o with biases; sliding and full layers alternate (layer_types); each
//         head has a sink logit s_h that joins the softmax's denominator:
//         p_j = exp(a_j) / (exp(s_h) + sum_i exp(a_i));  YaRN rope (rope_scaling).
//   MoE:  router logits = x W^T + b; top-k of them, softmax over the k; experts
//         down((clamp(up, +-7) + 1) * g sigmoid(1.702 g)), g = min(gate, 7), with biases,
//         stored stacked [E, in, out] with gate and up interleaved.
#include <fmt/format.h>

#include "core/error.h"
#include "kernels/gated_activation_math.h"
#include "layers/attention.h"
#include "layers/moe.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

class GptOssDecoderLayer : public DecoderLayer {
 public:
  GptOssDecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id)
      : attn_(w, fmt::format("model.layers.{}.self_attn", layer_id),
              attention_options(c, layer_id)),
        moe_(w, fmt::format("model.layers.{}.mlp", layer_id), moe_options(c)) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps);
    post_attention_norm_ =
        RMSNorm::load(w, p + "post_attention_layernorm.weight", c.hidden_size, eps);
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    attn_.forward(input_norm_.forward(ops, x), x, batch, ctx);
    moe_.forward(ops, post_attention_norm_.forward(ops, x), x);
  }

  std::optional<KVLayerLayout> kv_layout() const override { return attn_.kv_layout(); }

 private:
  static AttentionOptions attention_options(const ModelConfig& c, int layer_id) {
    AttentionOptions o = attention_options_from_config(c, layer_id);
    o.sinks = true;
    return o;
  }

  static MoEOptions moe_options(const ModelConfig& c) {
    MoEOptions o;
    o.hidden_size = c.hidden_size;
    o.router.num_experts = c.require_int("num_local_experts");
    o.router.top_k = c.raw.contains("num_experts_per_tok") ? c.require_int("num_experts_per_tok")
                                                           : c.require_int("experts_per_token");
    o.router.scoring = RouterScoring::Softmax;
    o.router.normalize_topk = true;  // softmax over the k chosen logits
    o.router_gate = "router";
    o.router_bias = true;
    o.storage = ExpertStorage::StackedInterleaved;
    o.experts = "experts";
    o.expert = {c.intermediate_size, /*gated=*/true, Activation::ClampedSwiglu, /*bias=*/true};
    return o;
  }

  GQAAttention attn_;
  MoELayer moe_;
  RMSNorm input_norm_, post_attention_norm_;
};

}  // namespace

std::unique_ptr<CausalLM> build_gpt_oss(const ModelConfig& c, ParamLoader& w, const StagePlan& s) {
  if (c.intermediate_size <= 0) c.require_int("intermediate_size");
  // The experts' clamp is gpt-oss's fixed 7 (kernels/gated_activation_math.h).
  const double limit = c.get_number("swiglu_limit", kClampedSwigluLimit);
  if (limit != kClampedSwigluLimit)
    fail("config.json: swiglu_limit {} is not supported: strata's gpt-oss experts clamp at {}",
         limit, kClampedSwigluLimit);
  // Published gpt-oss checkpoints store the experts in MXFP4 (`*_blocks`, `*_scales`).
  if (!w.dummy() && c.raw.contains("quantization_config") &&
      c.raw["quantization_config"].is_object())
    fail(
        "config.json: quantization_config ({}) is not supported: strata loads bf16/f16/f32 "
        "checkpoints; use a dequantized (bf16) checkpoint, or --load-format dummy to measure",
        c.raw["quantization_config"].value("quant_method", std::string("?")));
  return std::make_unique<DecoderModel>(
      c, w, s, [&](int layer_id) { return std::make_unique<GptOssDecoderLayer>(c, w, layer_id); });
}

}  // namespace strata
