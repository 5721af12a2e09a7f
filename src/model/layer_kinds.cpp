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
// (full_attention / sliding_attention); older configs imply sliding everywhere by a
// positive `sliding_window` (Mistral).
std::vector<LayerSpec> dense_decoder(const ModelConfig& c) {
  std::vector<LayerSpec> layers;
  if (c.raw.contains("layer_types") && c.raw["layer_types"].is_array()) {
    for (const auto& t : c.raw["layer_types"]) {
      const std::string type = t.is_string() ? t.get<std::string>() : "";
      if (type == "full_attention") layers.push_back(attention_layer(c, false));
      else if (type == "sliding_attention") {
        if (c.sliding_window <= 0)
          fail("config.json: layer_types has sliding_attention layers but sliding_window is not set");
        layers.push_back(attention_layer(c, true));
      } else {
        fail("config.json: layer_types entry '{}' is not supported for {}", t.dump(), c.architecture);
      }
    }
    return layers;
  }
  for (int i = 0; i < c.num_layers; ++i) layers.push_back(attention_layer(c, c.sliding_window > 0));
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

// model_type -> classifier. Families not listed are dense decoders.
const std::map<std::string, Classifier>& families() {
  static const std::map<std::string, Classifier> kFamilies = {
      {"llama", dense_decoder},
      {"qwen2", dense_decoder},
      {"qwen3", dense_decoder},
      {"mistral", dense_decoder},
      {"deepseek_v2", mla_moe_decoder}, {"deepseek_v3", mla_moe_decoder},
  };
  return kFamilies;
}

}  // namespace

std::vector<LayerSpec> classify_layers(const ModelConfig& c) {
  auto it = families().find(c.model_type);
  return it != families().end() ? it->second(c) : dense_decoder(c);
}

}  // namespace strata
