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

namespace strata {

// LFM2: `layer_types` (transformers 5) and `full_attn_idxs` (the published LFM2 configs) spell
// the same layout: short-conv layers with recurrent state and no KV cache, attention layers
// with a KV cache, a dense MLP in every layer; an unknown entry names itself.
TEST(LayerKinds, Lfm2LayerTypesAndFullAttnIdxsAgree) {
  const json base = json::parse(R"({"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2",
    "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2})");
  json types = base;
  types["layer_types"] = {"conv", "conv", "full_attention", "conv"};
  json idxs = base;
  idxs["full_attn_idxs"] = {2};
  for (const json& j : {types, idxs}) {
    const ModelConfig c = ModelConfig::from_json(j, "config.json");
    ASSERT_EQ(c.num_layers, 4);
    EXPECT_EQ(c.layers[0].recurrent, RecurrentKind::ShortConv);
    EXPECT_FALSE(c.layers[0].has_kv_cache());
    EXPECT_EQ(c.layers[2].attention, AttentionKind::Full);
    EXPECT_FALSE(c.layers[2].has_recurrent_state());
    for (const auto& l : c.layers) EXPECT_EQ(l.mlp, MlpKind::Dense);
    EXPECT_EQ(c.attention_layer_ids(), (std::vector<int>{2}));
    EXPECT_EQ(c.recurrent_layer_ids(), (std::vector<int>{0, 1, 3}));
  }
  json bad = base;
  bad["layer_types"] = {"conv", "mamba", "full_attention", "conv"};
  try {
    ModelConfig::from_json(bad, "config.json");
    FAIL() << "an unknown LFM2 layer type must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mamba'"), std::string::npos) << e.what();
  }
  json out_of_range = base;
  out_of_range["full_attn_idxs"] = {4};
  EXPECT_THROW(ModelConfig::from_json(out_of_range, "config.json"), Error);
}

}  // namespace strata

namespace strata {

// Qwen3-Next: Gated DeltaNet layers with recurrent state, gated attention layers with a KV
// cache; routed experts except in mlp_only_layers and off the decoder_sparse_step grid.
TEST(LayerKinds, Qwen3NextLinearAndFullAttentionWithSparseSteps) {
  json j = json::parse(R"({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
    "vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "num_experts": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3],
    "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                    "full_attention"]})");
  const ModelConfig c = ModelConfig::from_json(j, "config.json");
  ASSERT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.recurrent_layer_ids(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.attention_layer_ids(), (std::vector<int>{3}));
  EXPECT_EQ(c.layers[0].recurrent, RecurrentKind::GatedDeltaNet);
  EXPECT_EQ(c.layers[0].mlp, MlpKind::Dense);  // (0 + 1) % 2 != 0
  EXPECT_EQ(c.layers[1].mlp, MlpKind::MoE);
  EXPECT_EQ(c.layers[3].mlp, MlpKind::Dense);  // mlp_only_layers
  j["layer_types"][1] = "mamba";
  try {
    ModelConfig::from_json(j, "config.json");
    FAIL() << "an unknown Qwen3-Next layer type must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mamba'"), std::string::npos) << e.what();
  }
}

}  // namespace strata

namespace strata {

// The published Qwen3-Next-80B-A3B-Instruct config (bench/configs, as the hub has it: no
// layer_types but full_attention_interval 4, rope_theta and partial_rotary_factor at the top
// level) loads: 36 Gated DeltaNet layers, every fourth layer gated attention, experts everywhere.
TEST(LayerKinds, PublishedQwen3NextConfigLoads) {
  const ModelConfig c = ModelConfig::load(std::string(STRATA_TEST_DATA) +
                                          "/../../bench/configs/qwen3-next-80b-a3b-instruct");
  ASSERT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.recurrent_layer_ids().size(), 36u);
  std::vector<int> full;
  for (int i = 3; i < 48; i += 4) full.push_back(i);
  EXPECT_EQ(c.attention_layer_ids(), full);
  for (const auto& l : c.layers) EXPECT_EQ(l.mlp, MlpKind::MoE);
  EXPECT_EQ(c.layers[0].recurrent, RecurrentKind::GatedDeltaNet);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e7);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 0.25);
}

}  // namespace strata
