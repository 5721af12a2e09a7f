#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"

namespace strata {

namespace {
json nemotron_base() {
  // Bare Infinity, as the published configs write it.
  return parse_json_lenient(
      R"({"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
    "vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "time_step_limit": [0.0, Infinity]})",
      "config.json");
}
std::string kinds(const ModelConfig& c) {
  std::string s;
  for (const auto& l : c.layers) s += l.describe() + " ";
  return s;
}
}  // namespace

// transformers 4.x (`hybrid_override_pattern`, num_hidden_layers) and 5.x (`layers_block_type`,
// no num_hidden_layers) spell the same NemotronH layout.
TEST(LayerKinds, NemotronHPatternAndBlockTypeListAgree) {
  json v4 = nemotron_base();
  v4["hybrid_override_pattern"] = "M-*E";
  v4["num_hidden_layers"] = 4;
  json v5 = nemotron_base();
  v5["layers_block_type"] = {"mamba", "mlp", "attention", "moe"};
  json v5b = nemotron_base();
  v5b["layers_block_type"] = {"linear_attention", "mlp", "full_attention", "moe"};
  for (const json& j : {v4, v5, v5b}) {
    const ModelConfig c = ModelConfig::from_json(j, "config.json");
    ASSERT_EQ(c.num_layers, 4) << kinds(c);
    EXPECT_EQ(c.layers[0].recurrent, RecurrentKind::Mamba2);
    EXPECT_EQ(c.layers[0].mlp, MlpKind::None);
    EXPECT_EQ(c.layers[1].mlp, MlpKind::Dense);
    EXPECT_FALSE(c.layers[1].has_kv_cache() || c.layers[1].has_recurrent_state());
    EXPECT_EQ(c.layers[2].attention, AttentionKind::Full);
    EXPECT_EQ(c.layers[2].mlp, MlpKind::None);
    EXPECT_EQ(c.layers[3].mlp, MlpKind::MoE);
    EXPECT_EQ(c.attention_layer_ids(), (std::vector<int>{2}));
    EXPECT_EQ(c.recurrent_layer_ids(), (std::vector<int>{0}));
  }
  json bad = nemotron_base();
  bad["hybrid_override_pattern"] = "M?";
  bad["num_hidden_layers"] = 2;
  EXPECT_THROW(ModelConfig::from_json(bad, "config.json"), Error);
  json short_pattern = nemotron_base();
  short_pattern["hybrid_override_pattern"] = "M-";
  short_pattern["num_hidden_layers"] = 3;
  EXPECT_THROW(ModelConfig::from_json(short_pattern, "config.json"), Error);
}

TEST(LayerKinds, BambaAndFalconH1) {
  json bamba = json::parse(R"({"architectures": ["BambaForCausalLM"], "model_type": "bamba",
    "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "attn_layer_indices": [0, 3]})");
  const ModelConfig b = ModelConfig::from_json(bamba, "config.json");
  EXPECT_EQ(b.attention_layer_ids(), (std::vector<int>{0, 3}));
  EXPECT_EQ(b.recurrent_layer_ids(), (std::vector<int>{1, 2}));
  for (const auto& l : b.layers) EXPECT_EQ(l.mlp, MlpKind::Dense);
  bamba["attn_layer_indices"] = {7};
  EXPECT_THROW(ModelConfig::from_json(bamba, "config.json"), Error);

  json falcon = json::parse(R"({"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1",
    "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4})");
  const ModelConfig f = ModelConfig::from_json(falcon, "config.json");
  for (const auto& l : f.layers) {
    EXPECT_EQ(l.attention, AttentionKind::Full);
    EXPECT_EQ(l.recurrent, RecurrentKind::Mamba2);
    EXPECT_EQ(l.describe(), "full_attention+mamba2/dense");
  }
}

// The published Nemotron-3-Nano config: attention only at [5, 12, 19, 26, 33, 42].
TEST(LayerKinds, NemotronNanoHubPattern) {
  json j = nemotron_base();
  j["hybrid_override_pattern"] = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
  j["num_hidden_layers"] = 52;
  const ModelConfig c = ModelConfig::from_json(j, "config.json");
  EXPECT_EQ(c.attention_layer_ids(), (std::vector<int>{5, 12, 19, 26, 33, 42}));
  EXPECT_EQ(c.recurrent_layer_ids().size(), 23u);
}

}  // namespace strata
