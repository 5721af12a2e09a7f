// The one place that decides what each decoder layer is (DESIGN.md §1.3). Every family
// whose layers are not all plain attention + dense MLP gets one entry in kFamilies;
// everything downstream (pools, backends, pipeline partitioning) reads the result.
#include <functional>
#include <map>

#include "core/error.h"
#include "model/config.h"

namespace strata {

namespace {

using Classifier = std::function<std::vector<LayerSpec>(const ModelConfig&)>;

LayerSpec attention_layer(const ModelConfig& c, bool sliding) {
  LayerSpec s;
  s.attention = sliding ? AttentionKind::Sliding : AttentionKind::Full;
  s.sliding_window = sliding ? c.sliding_window : 0;
  s.mlp = MlpKind::Dense;
  return s;
}

// Dense decoders: every layer attention + MLP. transformers 5 lists `layer_types`
// (full_attention / sliding_attention); older Gemma 3 configs give `sliding_window_pattern`
// N instead (every N-th layer global, the rest sliding); other older configs imply sliding
// everywhere by a positive `sliding_window` (Mistral).
std::vector<LayerSpec> dense_decoder(const ModelConfig& c) {
  std::vector<LayerSpec> layers;
  if (c.raw.contains("layer_types") && c.raw["layer_types"].is_array()) {
    for (const auto& t : c.raw["layer_types"]) {
      const std::string type = t.is_string() ? t.get<std::string>() : "";
      if (type == "full_attention")
        layers.push_back(attention_layer(c, false));
      else if (type == "sliding_attention") {
        if (c.sliding_window <= 0)
          fail(
              "config.json: layer_types has sliding_attention layers but sliding_window is not "
              "set");
        layers.push_back(attention_layer(c, true));
      } else {
        fail("config.json: layer_types entry '{}' is not supported for {}", t.dump(),
             c.architecture);
      }
    }
    return layers;
  }
  const int pattern = c.get_int("sliding_window_pattern", 0);
  if (pattern < 0)
    fail("config.json: sliding_window_pattern must be positive, got {}; fix config.json", pattern);
  for (int i = 0; i < c.num_layers; ++i) {
    const bool global = pattern > 0 && (i + 1) % pattern == 0;
    layers.push_back(attention_layer(c, c.sliding_window > 0 && !global));
  }
  return layers;
}

// DeepSeek-V2/V3: every layer is MLA; the MLP is routed experts from layer
// first_k_dense_replace on, every moe_layer_freq-th layer, and dense before that.
std::vector<LayerSpec> mla_moe_decoder(const ModelConfig& c) {
  const int first_moe = c.get_int("first_k_dense_replace", 0);
  const int freq = c.get_int("moe_layer_freq", 1);
  if (freq <= 0) fail("config.json: moe_layer_freq must be positive, got {}", freq);
  const bool has_experts = c.get_int("n_routed_experts", 0) > 0;
  std::vector<LayerSpec> layers(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    layers[i].attention = AttentionKind::MLA;
    layers[i].mlp = has_experts && i >= first_moe && i % freq == 0 ? MlpKind::MoE : MlpKind::Dense;
  }
  return layers;
}

LayerSpec mamba2_layer(MlpKind mlp) {
  LayerSpec s;
  s.recurrent = RecurrentKind::Mamba2;
  s.mlp = mlp;
  return s;
}

// NemotronH: every layer is ONE mixer behind a pre-norm: Mamba2, attention, a dense MLP or an
// MoE. transformers 4.x configs spell the layout as `hybrid_override_pattern` (one character
// per layer: M * - E); transformers 5 writes `layers_block_type` (a name per layer).
std::vector<LayerSpec> nemotron_h(const ModelConfig& c) {
  std::vector<std::string> types;
  if (c.raw.contains("layers_block_type") && c.raw["layers_block_type"].is_array()) {
    for (const auto& t : c.raw["layers_block_type"])
      types.push_back(t.is_string() ? t.get<std::string>() : t.dump());
  } else if (c.raw.contains("hybrid_override_pattern") &&
             c.raw["hybrid_override_pattern"].is_string()) {
    for (char ch : c.raw["hybrid_override_pattern"].get<std::string>()) types.emplace_back(1, ch);
  } else {
    fail(
        "config.json: {} needs `hybrid_override_pattern` (e.g. \"M-M*-\") or `layers_block_type` "
        "to say what each layer is",
        c.architecture);
  }
  std::vector<LayerSpec> layers;
  for (const std::string& t : types) {
    LayerSpec s;
    s.mlp = MlpKind::None;
    if (t == "M" || t == "mamba" || t == "linear_attention")
      s.recurrent = RecurrentKind::Mamba2;
    else if (t == "*" || t == "attention" || t == "full_attention")
      s.attention = AttentionKind::Full;
    else if (t == "-" || t == "mlp")
      s.mlp = MlpKind::Dense;
    else if (t == "E" || t == "moe")
      s.mlp = MlpKind::MoE;
    else
      fail(
          "config.json: NemotronH layer type '{}' is not known (expected M, *, -, E or mamba, "
          "attention, mlp, moe)",
          t);
    layers.push_back(s);
  }
  return layers;
}

// Bamba: Mamba2 layers except those listed in `attn_layer_indices`; each layer has an MLP.
std::vector<LayerSpec> bamba(const ModelConfig& c) {
  std::vector<LayerSpec> layers(c.num_layers, mamba2_layer(MlpKind::Dense));
  if (c.raw.contains("attn_layer_indices") && c.raw["attn_layer_indices"].is_array()) {
    for (const auto& i : c.raw["attn_layer_indices"]) {
      if (!i.is_number_integer() || i.get<int>() < 0 || i.get<int>() >= c.num_layers)
        fail("config.json: attn_layer_indices entry {} is not a layer of a {}-layer model",
             i.dump(), c.num_layers);
      layers[i.get<int>()] = attention_layer(c, false);
    }
  }
  return layers;
}

// Falcon-H1: attention and Mamba2 side by side in every layer, then an MLP.
std::vector<LayerSpec> falcon_h1(const ModelConfig& c) {
  LayerSpec s = mamba2_layer(MlpKind::Dense);
  s.attention = AttentionKind::Full;
  return std::vector<LayerSpec>(c.num_layers, s);
}

// LFM2: `layer_types` names each layer `conv` (a short conv) or `full_attention`; every layer
// has a dense MLP. Older configs list the attention layers in `full_attn_idxs` instead.
std::vector<LayerSpec> lfm2(const ModelConfig& c) {
  LayerSpec conv;
  conv.recurrent = RecurrentKind::ShortConv;
  std::vector<LayerSpec> layers(c.num_layers, conv);
  if (c.raw.contains("layer_types") && c.raw["layer_types"].is_array()) {
    layers.clear();
    for (const auto& t : c.raw["layer_types"]) {
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type == "conv")
        layers.push_back(conv);
      else if (type == "full_attention")
        layers.push_back(attention_layer(c, false));
      else
        fail(
            "config.json: LFM2 layer_types entry '{}' is not known (expected conv or "
            "full_attention)",
            type);
    }
  } else if (c.raw.contains("full_attn_idxs") && c.raw["full_attn_idxs"].is_array()) {
    for (const auto& i : c.raw["full_attn_idxs"]) {
      if (!i.is_number_integer() || i.get<int>() < 0 || i.get<int>() >= c.num_layers)
        fail("config.json: full_attn_idxs entry {} is not a layer of a {}-layer model", i.dump(),
             c.num_layers);
      layers[i.get<int>()] = attention_layer(c, false);
    }
  } else {
    fail(
        "config.json: {} needs `layer_types` (conv / full_attention per layer) or "
        "`full_attn_idxs` to say what each layer is",
        c.architecture);
  }
  return layers;
}

// Qwen3-Next: `layer_types` names each layer `linear_attention` (a Gated DeltaNet) or
// `full_attention` (gated attention); the published configs say `full_attention_interval`
// instead (every interval-th layer is full attention). The MLP is routed experts except in
// `mlp_only_layers` and off the decoder_sparse_step grid, where it is dense.
std::vector<LayerSpec> qwen3_next(const ModelConfig& c) {
  json types = json::array();
  if (c.raw.contains("layer_types") && c.raw["layer_types"].is_array()) {
    types = c.raw["layer_types"];
  } else {
    const int interval = c.get_int("full_attention_interval", 4);
    if (interval <= 0)
      fail("config.json: full_attention_interval must be positive, got {}; fix config.json",
           interval);
    for (int i = 0; i < c.num_layers; ++i)
      types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  }
  const int step = c.get_int("decoder_sparse_step", 1);
  if (step <= 0) fail("config.json: decoder_sparse_step must be positive, got {}", step);
  std::vector<bool> mlp_only(c.num_layers, false);
  if (c.raw.contains("mlp_only_layers") && c.raw["mlp_only_layers"].is_array())
    for (const auto& i : c.raw["mlp_only_layers"]) {
      if (!i.is_number_integer() || i.get<int>() < 0 || i.get<int>() >= c.num_layers)
        fail("config.json: mlp_only_layers entry {} is not a layer of a {}-layer model", i.dump(),
             c.num_layers);
      mlp_only[i.get<int>()] = true;
    }
  const bool has_experts = c.get_int("num_experts", 0) > 0;
  std::vector<LayerSpec> layers;
  for (const auto& t : types) {
    const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
    LayerSpec s;
    if (type == "linear_attention")
      s.recurrent = RecurrentKind::GatedDeltaNet;
    else if (type == "full_attention")
      s.attention = AttentionKind::Full;
    else
      fail(
          "config.json: Qwen3-Next layer_types entry '{}' is not known (expected "
          "linear_attention or full_attention)",
          type);
    const int i = static_cast<int>(layers.size());
    const bool moe = has_experts && i < c.num_layers && !mlp_only[i] && (i + 1) % step == 0;
    s.mlp = moe ? MlpKind::MoE : MlpKind::Dense;
    layers.push_back(s);
  }
  return layers;
}

// model_type -> classifier. Families not listed are dense decoders.
const std::map<std::string, Classifier>& families() {
  static const std::map<std::string, Classifier> kFamilies = {
      {"llama", dense_decoder},         {"qwen2", dense_decoder},
      {"qwen3", dense_decoder},         {"mistral", dense_decoder},
      {"deepseek_v2", mla_moe_decoder}, {"deepseek_v3", mla_moe_decoder},
      {"nemotron_h", nemotron_h},       {"bamba", bamba},
      {"falcon_h1", falcon_h1},         {"lfm2", lfm2},
      {"qwen3_next", qwen3_next},
  };
  return kFamilies;
}

}  // namespace

std::vector<LayerSpec> classify_layers(const ModelConfig& c) {
  auto it = families().find(c.model_type);
  return it != families().end() ? it->second(c) : dense_decoder(c);
}

}  // namespace strata
