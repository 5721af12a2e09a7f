// DeepSeek-V2 / V3:  h = x + MLA(RMSNorm(x));  out = h + FFN(RMSNorm(h))
//   MLA: multi-head latent attention (layers/mla_attention.h), q through a low-rank
//        q_a -> norm -> q_b when q_lora_rank is set (V3, V2), straight q_proj otherwise (V2-Lite).
//   FFN: a dense SwiGLU MLP for the first `first_k_dense_replace` layers, then (every
//        `moe_layer_freq`-th layer) routed experts + shared experts (layers/moe.h):
//        V2 softmax greedy / group-limited greedy top-k; V3 sigmoid scores with
//        e_score_correction_bias and grouped top-k (n_group, topk_group).
//   RoPE: only the qk_rope_head_dim part of each head is rotated, in interleaved pairs
//        (V2 always; V3 when rope_interleave, its default); YaRN as DeepSeek configures it,
//        with the softmax scale multiplied by mscale(factor, mscale_all_dim)^2.
// Every dimension is checked before a weight is read (read_settings).
#include <fmt/format.h>

#include "core/error.h"
#include "layers/attention.h"
#include "layers/mla_attention.h"
#include "layers/moe.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

struct DeepseekSettings {
  MLAOptions attention;  // without layer_id
  MoEOptions moe;
  bool any_moe = false;
};

int positive_field(const ModelConfig& c, const std::string& key, const std::string& what) {
  const int v = c.get_int(key, -1);
  if (v <= 0)
    fail(
        "config.json: {} needs '{}' ({}) as a positive integer, but it is {}; the checkpoint's "
        "config is incomplete or not a DeepSeek MLA config",
        c.architecture, key, what, c.raw.contains(key) ? c.raw[key].dump() : "missing");
  return v;
}

MLAOptions read_attention(const ModelConfig& c) {
  MLAOptions a;
  a.hidden_size = c.hidden_size;
  a.num_heads = c.num_attention_heads;
  a.kv_lora_rank =
      positive_field(c, "kv_lora_rank", "width of the compressed KV latent MLA caches");
  a.qk_nope_head_dim =
      positive_field(c, "qk_nope_head_dim", "per-head query/key width without rope");
  a.qk_rope_head_dim = positive_field(c, "qk_rope_head_dim", "per-head rotary query/key width");
  a.v_head_dim = positive_field(c, "v_head_dim", "per-head value width");
  if (a.qk_rope_head_dim % 2 != 0)
    fail("config.json: qk_rope_head_dim {} must be even: rotary embedding rotates pairs",
         a.qk_rope_head_dim);
  const int qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
  if (c.raw.contains("qk_head_dim") && !c.raw["qk_head_dim"].is_null() &&
      c.get_int("qk_head_dim", 0) != qk_head)
    fail(
        "config.json: qk_head_dim {} is inconsistent with qk_nope_head_dim {} + qk_rope_head_dim "
        "{} = {}",
        c.raw["qk_head_dim"].dump(), a.qk_nope_head_dim, a.qk_rope_head_dim, qk_head);
  if (c.raw.contains("q_lora_rank") && !c.raw["q_lora_rank"].is_null())
    a.q_lora_rank =
        positive_field(c, "q_lora_rank", "rank of the low-rank query projection, or null");
  a.bias = c.attention_bias;
  a.rope = c.rope;
  // DeepSeek-V2 rotates complex pairs (2i, 2i+1); V3 does the same unless rope_interleave is false.
  a.rope_interleaved = c.model_type == "deepseek_v2" || c.get_bool("rope_interleave", true);
  // Under YaRN the scale takes mscale^2, as in DeepSeek's reference code and transformers'
  // DeepseekV3Attention (transformers' V2 port leaves it out; DeepSeek-V2 itself does not).
  a.scale = mla_softmax_scale(qk_head, a.rope);
  return a;
}

MoEOptions read_moe(const ModelConfig& c) {
  MoEOptions m;
  m.hidden_size = c.hidden_size;
  RouterConfig& r = m.router;
  r.num_experts = positive_field(c, "n_routed_experts", "number of routed experts");
  r.top_k = positive_field(c, "num_experts_per_tok", "experts chosen per token");
  r.num_groups = c.get_int("n_group", 1);
  r.topk_groups = c.get_int("topk_group", 1);
  r.routed_scaling_factor = static_cast<float>(c.get_number("routed_scaling_factor", 1.0));
  r.normalize_topk = c.get_bool("norm_topk_prob", false);
  // The router is data: V3 configs say scoring_func sigmoid + topk_method noaux_tc (also the
  // defaults transformers assumes for V3), V2 configs softmax + greedy / group_limited_greedy.
  const bool v3 = c.model_type == "deepseek_v3";
  const std::string scoring = c.get_string("scoring_func", v3 ? "sigmoid" : "softmax");
  if (scoring == "softmax")
    r.scoring = RouterScoring::Softmax;
  else if (scoring == "sigmoid")
    r.scoring = RouterScoring::Sigmoid;
  else
    fail("config.json: scoring_func '{}' is not supported (supported: softmax, sigmoid)", scoring);
  const std::string method = c.get_string("topk_method", v3 ? "noaux_tc" : "greedy");
  if (method == "greedy") {
    r.num_groups = r.topk_groups = 1;
  } else if (method == "group_limited_greedy") {
    r.group_score = GroupScore::Max;
  } else if (method == "noaux_tc") {
    r.group_score = GroupScore::TopTwoSum;
    r.correction_bias = true;
  } else {
    fail(
        "config.json: topk_method '{}' is not supported for {} (supported: greedy, "
        "group_limited_greedy, noaux_tc)",
        method, c.architecture);
  }
  r.validate();
  const Activation act = parse_activation(c.hidden_act);
  m.expert = {positive_field(c, "moe_intermediate_size", "width of one routed expert"), true, act};
  const int shared = c.get_int("n_shared_experts", 0);
  if (shared > 0) m.shared_expert = {shared * m.expert.intermediate_size, true, act};
  return m;
}

DeepseekSettings read_settings(const ModelConfig& c) {
  DeepseekSettings s;
  s.attention = read_attention(c);
  bool any_dense = false;
  for (const LayerSpec& l : c.layers) {
    s.any_moe |= l.mlp == MlpKind::MoE;
    any_dense |= l.mlp == MlpKind::Dense;
  }
  if (s.any_moe) s.moe = read_moe(c);
  if (any_dense) positive_field(c, "intermediate_size", "width of the dense MLP layers");
  return s;
}

class DeepseekDecoderLayer : public DecoderLayer {
 public:
  DeepseekDecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id,
                       const DeepseekSettings& s)
      : attn_(w, fmt::format("model.layers.{}.self_attn", layer_id),
              with_layer(s.attention, layer_id)) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps);
    post_attention_norm_ =
        RMSNorm::load(w, p + "post_attention_layernorm.weight", c.hidden_size, eps);
    if (c.layers[layer_id].mlp == MlpKind::MoE)
      moe_ = std::make_unique<MoELayer>(w, p + "mlp", s.moe);
    else
      dense_ = std::make_unique<GatedMLP>(w, p + "mlp", c.hidden_size, c.intermediate_size,
                                          parse_activation(c.hidden_act), c.mlp_bias);
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    attn_.forward(input_norm_.forward(ops, x), x, batch, ctx);
    const Tensor h = post_attention_norm_.forward(ops, x);
    if (moe_)
      moe_->forward(ops, h, x);
    else
      dense_->forward(ops, h, x);
  }

  std::optional<KVLayerLayout> kv_layout() const override { return attn_.kv_layout(); }

 private:
  static MLAOptions with_layer(MLAOptions o, int layer_id) {
    o.layer_id = layer_id;
    return o;
  }

  MLAAttention attn_;
  RMSNorm input_norm_, post_attention_norm_;
  std::unique_ptr<MoELayer> moe_;
  std::unique_ptr<GatedMLP> dense_;
};

}  // namespace

std::unique_ptr<CausalLM> build_deepseek(const ModelConfig& config, ParamLoader& weights,
                                         const StagePlan& stage) {
  const DeepseekSettings settings = read_settings(config);  // before any weight is read
  return std::make_unique<DecoderModel>(config, weights, stage, [&](int layer_id) {
    return std::make_unique<DeepseekDecoderLayer>(config, weights, layer_id, settings);
  });
}

}  // namespace strata
