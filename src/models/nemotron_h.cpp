// NemotronH (Nemotron-H, Nemotron-Nano-v2, Nemotron-3-Nano): a stack of single-mixer blocks,
//   x = x + Mixer(RMSNorm(x)),   Mixer one of  Mamba2 | attention | MLP | MoE
// as the config's layer list says (layer_kinds.cpp). Attention has no positional encoding
// (the Mamba2 layers carry position); MLPs and experts are ungated with relu2; MoE layers use
// the shared MoE layer (layers/moe.h).
#include <fmt/format.h>

#include "core/error.h"
#include "layers/attention.h"
#include "layers/mamba2.h"
#include "layers/mlp.h"
#include "layers/moe.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

class NemotronHBlock : public DecoderLayer {
 public:
  NemotronHBlock(const ModelConfig& c, ParamLoader& w, int layer_id) {
    const LayerSpec& spec = c.layers[layer_id];
    const std::string p = fmt::format("backbone.layers.{}.", layer_id);
    norm_ = RMSNorm::load(w, p + "norm.weight", c.hidden_size, static_cast<float>(c.rms_norm_eps));
    if (spec.recurrent == RecurrentKind::Mamba2) {
      mamba_.emplace(w, p + "mixer", mamba_options(c, layer_id));
    } else if (spec.attention == AttentionKind::Full) {
      attn_.emplace(w, p + "mixer", attention_options(c, layer_id));
    } else if (spec.mlp == MlpKind::Dense) {
      mlp_.emplace(w, p + "mixer", c.hidden_size, c.require_int("intermediate_size"),
                   parse_activation(c.get_string("mlp_hidden_act", "relu2"), "mlp_hidden_act"),
                   c.mlp_bias);
    } else {
      moe_.emplace(w, p + "mixer", moe_options(c));
    }
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    const Tensor h = norm_.forward(ops, x);
    if (mamba_)
      ops.add(x, mamba_->forward(h, batch, ctx));
    else if (attn_)
      attn_->forward(h, x, batch, ctx);
    else if (mlp_)
      mlp_->forward(ops, h, x);
    else
      moe_->forward(ops, h, x);
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
        {"mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel",
         "chunk_size", "use_conv_bias", "use_bias"},
        layer_id);
    o.out_proj_bias = o.proj_bias;
    o.activation = c.get_string("mamba_hidden_act", "silu");
    o.norm_groups = o.n_groups;  // the gated norm is grouped like B and C
    return o;
  }

  // Nemotron-3-Nano-style MoE: sigmoid router with e_score_correction_bias and grouped top-k,
  // relu2 experts without a gate, one always-on shared expert of its own width.
  static MoEOptions moe_options(const ModelConfig& c) {
    if (c.raw.contains("moe_latent_size") && !c.raw["moe_latent_size"].is_null())
      fail("config.json: moe_latent_size (latent MoE projections) is not supported yet for {}",
           c.architecture);
    MoEOptions m;
    m.hidden_size = c.hidden_size;
    RouterConfig& r = m.router;
    r.num_experts = c.require_int("n_routed_experts");
    r.top_k = c.require_int("num_experts_per_tok");
    r.scoring = RouterScoring::Sigmoid;
    r.num_groups = c.get_int("n_group", 1);
    r.topk_groups = c.get_int("topk_group", 1);
    r.group_score = GroupScore::TopTwoSum;
    r.correction_bias = true;
    r.normalize_topk = c.get_bool("norm_topk_prob", true);
    r.routed_scaling_factor = static_cast<float>(c.get_number("routed_scaling_factor", 1.0));
    r.validate();
    const Activation act =
        parse_activation(c.get_string("mlp_hidden_act", "relu2"), "mlp_hidden_act");
    m.expert = {c.require_int("moe_intermediate_size"), false, act, c.mlp_bias};
    const int shared = c.get_int("moe_shared_expert_intermediate_size", 0);
    if (shared > 0) m.shared_expert = {shared, false, act, c.mlp_bias};
    return m;
  }

  static AttentionOptions attention_options(const ModelConfig& c, int layer_id) {
    AttentionOptions o = attention_options_from_config(c, layer_id);
    o.head_dim = c.get_int("head_dim", c.get_int("attention_head_dim", c.head_dim));
    o.use_rope = false;  // NemotronH attention has no positional encoding
    return o;
  }

  RMSNorm norm_;
  std::optional<Mamba2Mixer> mamba_;
  std::optional<GQAAttention> attn_;
  std::optional<UngatedMLP> mlp_;
  std::optional<MoELayer> moe_;
};

}  // namespace

std::unique_ptr<CausalLM> build_nemotron_h(const ModelConfig& config, ParamLoader& weights,
                                           const StagePlan& stage) {
  // Every norm of the family uses layer_norm_epsilon.
  ModelConfig c = config;
  c.rms_norm_eps = config.get_number("layer_norm_epsilon", config.rms_norm_eps);
  DecoderNames names;
  names.embed = "backbone.embeddings.weight";
  names.final_norm = "backbone.norm_f.weight";
  return std::make_unique<DecoderModel>(
      c, weights, stage,
      [&](int layer_id) { return std::make_unique<NemotronHBlock>(c, weights, layer_id); }, names);
}

}  // namespace strata
