// Falcon-H1 (TII): attention and Mamba2 side by side in every layer, then a SwiGLU MLP, with
// muP multipliers on every branch:
//   h   = RMSNorm(x)
//   x  += ssm_out * Mamba2(h)  +  attn_out * Attn(attn_in * h)       (k scaled by key_multiplier)
//   x  += down_mult * down(up(h2) * silu(gate_mult * gate(h2))),  h2 = RMSNorm(x)
// Mamba2's input is scaled by ssm_in_multiplier and its in_proj output by the five
// ssm_multipliers over [z | x | B | C | dt]; embeddings and logits carry their own multipliers.
#include <fmt/format.h>

#include "core/error.h"
#include "layers/attention.h"
#include "layers/mamba2.h"
#include "model/decoder_model.h"

namespace strata {

namespace {

// muP multipliers of one Falcon-H1 model; 1 where the config leaves them out.
struct FalconMultipliers {
  float attention_in, attention_out, key, ssm_in, ssm_out, mlp_gate, mlp_down;
  std::vector<float> zxbcdt;  // five, over [z | x | B | C | dt]

  explicit FalconMultipliers(const ModelConfig& c) {
    auto num = [&](const char* key) { return static_cast<float>(c.get_number(key, 1.0)); };
    auto list = [&](const char* key, size_t n) {
      std::vector<float> v(n, 1.0f);
      if (c.raw.contains(key) && c.raw[key].is_array()) {
        if (c.raw[key].size() != n)
          fail("config.json: {} should have {} entries, has {}", key, n, c.raw[key].size());
        for (size_t i = 0; i < n; ++i) v[i] = c.raw[key][i].get<float>();
      }
      return v;
    };
    attention_in = num("attention_in_multiplier");
    attention_out = num("attention_out_multiplier");
    key = num("key_multiplier");
    ssm_in = num("ssm_in_multiplier");
    ssm_out = num("ssm_out_multiplier");
    const auto mlp = list("mlp_multipliers", 2);
    mlp_gate = mlp[0];
    mlp_down = mlp[1];
    zxbcdt = list("ssm_multipliers", 5);
  }
};

class FalconH1MLP {
 public:
  FalconH1MLP(const ModelConfig& c, ParamLoader& w, const std::string& p,
              const FalconMultipliers& m)
      : gate_mult_(m.mlp_gate), down_mult_(m.mlp_down) {
    if (c.hidden_act != "silu")
      fail("config.json: Falcon-H1 hidden_act '{}' is not supported (silu)", c.hidden_act);
    // Tensor parallelism: this rank's intermediate columns of gate and up; down_proj sums them.
    // The multipliers are scalars: the gate's scales each rank's columns, the down's the sum.
    const Communicator& group = w.tensor_parallel();
    const Shard columns{group.rank(), group.size()};
    const int64_t I = c.intermediate_size;
    STRATA_CHECK(I % group.size() == 0, "{}: intermediate size {} over {} ranks", p, I,
                 group.size());
    intermediate_ = columns.size(I);
    gate_up_ = Linear::load_column_parallel(w, {p + ".gate_proj", p + ".up_proj"}, c.hidden_size,
                                            {I, I}, {columns, columns}, c.mlp_bias);
    down_ = Linear::load_row_parallel(w, p + ".down_proj", I, c.hidden_size, c.mlp_bias);
  }
  // residual += down_mult * down(silu(gate_mult * gate x) * up x)
  void forward(Ops& ops, const Tensor& x, Tensor& residual) const {
    Tensor gate_up = gate_up_.forward(ops, x);
    if (gate_mult_ != 1.0f) {
      Tensor gate = gate_up.slice_cols(0, intermediate_);
      ops.scale(gate, gate_mult_);
    }
    Tensor act = ops.empty_activation({x.rows(), intermediate_});
    ops.gated_activation(gate_up, Activation::Silu, act);
    if (down_mult_ == 1.0f) return down_.forward_into(ops, act, residual, /*accumulate=*/true);
    Tensor out = down_.forward(ops, act);
    ops.scale(out, down_mult_);
    ops.add(residual, out);
  }

 private:
  int64_t intermediate_;
  float gate_mult_, down_mult_;
  Linear gate_up_, down_;
};

class FalconH1DecoderLayer : public DecoderLayer {
 public:
  FalconH1DecoderLayer(const ModelConfig& c, ParamLoader& w, int layer_id,
                       const FalconMultipliers& m)
      : m_(m),
        mamba_(w, fmt::format("model.layers.{}.mamba", layer_id), mamba_options(c, layer_id, m)),
        attn_(w, fmt::format("model.layers.{}.self_attn", layer_id),
              attention_options(c, layer_id, m)),
        mlp_(c, w, fmt::format("model.layers.{}.feed_forward", layer_id), m) {
    const std::string p = fmt::format("model.layers.{}.", layer_id);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    input_norm_ = RMSNorm::load(w, p + "input_layernorm.weight", c.hidden_size, eps);
    pre_ff_norm_ = RMSNorm::load(w, p + "pre_ff_layernorm.weight", c.hidden_size, eps);
  }

  void forward(Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) override {
    Ops& ops = *ctx.ops;
    const Tensor h = input_norm_.forward(ops, x);
    Tensor ssm = mamba_.forward(h, batch, ctx);
    Tensor attn_in = ops.empty({h.rows(), h.cols()}, h.dtype());
    ops.copy(h, attn_in);
    ops.scale(attn_in, m_.attention_in);
    Tensor attn = attn_.forward(attn_in, batch, ctx);
    ops.scale(ssm, m_.ssm_out);
    ops.scale(attn, m_.attention_out);
    ops.add(x, ssm);
    ops.add(x, attn);
    mlp_.forward(ops, pre_ff_norm_.forward(ops, x), x);
  }

  std::optional<KVLayerLayout> kv_layout() const override { return attn_.kv_layout(); }
  std::optional<RecurrentStateLayout> state_layout() const override {
    return mamba_.state_layout();
  }

 private:
  static Mamba2Options mamba_options(const ModelConfig& c, int layer_id,
                                     const FalconMultipliers& m) {
    Mamba2Options o = mamba2_options_from_config(
        c,
        {"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv",
         "mamba_chunk_size", "mamba_conv_bias", "mamba_proj_bias"},
        layer_id);
    const int d_ssm =
        c.get_int("mamba_d_ssm", static_cast<int>(c.get_number("mamba_expand", 2) * c.hidden_size));
    if (d_ssm != o.intermediate())
      fail(
          "config.json: mamba_d_ssm (or mamba_expand x hidden_size) = {} but mamba_n_heads x "
          "mamba_d_head = {}",
          d_ssm, o.intermediate());
    o.out_proj_bias = c.get_bool("projectors_bias", false);
    o.activation = c.hidden_act;
    o.gated_norm = c.get_bool("mamba_rms_norm", false);
    o.norm_groups = o.n_groups;
    o.norm_before_gate = c.get_bool("mamba_norm_before_gate", true);
    o.input_scale = m.ssm_in;
    // Column multipliers over [z | x | B | C | dt] of in_proj's output.
    const int I = o.intermediate(), GN = o.n_groups * o.state_size;
    const int widths[5] = {I, I, GN, GN, o.num_heads};
    for (int part = 0; part < 5; ++part)
      o.in_proj_scale.insert(o.in_proj_scale.end(), widths[part], m.zxbcdt[part]);
    return o;
  }

  static AttentionOptions attention_options(const ModelConfig& c, int layer_id,
                                            const FalconMultipliers& m) {
    AttentionOptions o = attention_options_from_config(c, layer_id);
    o.k_scale = m.key;
    return o;
  }

  FalconMultipliers m_;
  RMSNorm input_norm_, pre_ff_norm_;
  Mamba2Mixer mamba_;
  GQAAttention attn_;
  FalconH1MLP mlp_;
};

}  // namespace

std::unique_ptr<CausalLM> build_falcon_h1(const ModelConfig& config, ParamLoader& weights,
                                          const StagePlan& stage) {
  if (config.intermediate_size <= 0) config.require_int("intermediate_size");
  const FalconMultipliers m(config);
  DecoderNames names;
  names.final_norm = "model.final_layernorm.weight";
  names.embed_scale = static_cast<float>(config.get_number("embedding_multiplier", 1.0));
  names.logits_scale = static_cast<float>(config.get_number("lm_head_multiplier", 1.0));
  return std::make_unique<DecoderModel>(
      config, weights, stage,
      [&](int layer_id) {
        return std::make_unique<FalconH1DecoderLayer>(config, weights, layer_id, m);
      },
      names);
}

}  // namespace strata
