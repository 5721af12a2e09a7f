#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace strata {

namespace {
json base_config() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5})");
}
std::string error_of(const json& j) {
  try {
    ModelConfig::from_json(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ModelConfig, ParsesBothRopeSpellings) {
  json v4 = base_config();
  v4["rope_theta"] = 500000.0;
  v4["rope_scaling"] = {
      {"rope_type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 8192}};
  json v5 = base_config();
  v5["rope_parameters"] = {{"rope_theta", 500000.0},
                           {"rope_type", "llama3"},
                           {"factor", 8.0},
                           {"original_max_position_embeddings", 8192}};
  for (const json& j : {v4, v5}) {
    const ModelConfig c = ModelConfig::from_json(j, "config.json");
    EXPECT_EQ(c.rope.type, "llama3");
    EXPECT_EQ(c.rope.theta, 500000.0);
    EXPECT_EQ(c.rope.factor, 8.0);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.layers.size(), 3u);
  }
}

TEST(ModelConfig, AcceptsBareAndObjectInfinity) {
  const json a = parse_json_lenient(
      R"({"x": Infinity, "y": -Infinity, "s": "Infinity", "z": {"__float__": "Infinity"}})", "t");
  EXPECT_TRUE(std::isinf(*json_number(a, "x")));
  EXPECT_LT(*json_number(a, "y"), 0);
  EXPECT_EQ(a["s"], "Infinity");  // inside a string it stays a string
  EXPECT_TRUE(std::isinf(*json_number(a, "z")));
}

TEST(ModelConfig, SlidingWindowFromLayerTypesOrGlobalWindow) {
  json j = base_config();
  j["sliding_window"] = 8;
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  ModelConfig c = ModelConfig::from_json(j, "config.json");
  EXPECT_EQ(c.layers[0].attention, AttentionKind::Sliding);
  EXPECT_EQ(c.layers[0].sliding_window, 8);
  EXPECT_EQ(c.layers[1].attention, AttentionKind::Full);
  j.erase("layer_types");
  j["model_type"] = "mistral";
  c = ModelConfig::from_json(j, "config.json");
  for (const auto& l : c.layers) EXPECT_EQ(l.sliding_window, 8);
  j["use_sliding_window"] = false;  // Qwen2 spelling: the window is off
  c = ModelConfig::from_json(j, "config.json");
  for (const auto& l : c.layers) EXPECT_EQ(l.attention, AttentionKind::Full);
}

// Gemma 3 as transformers 4.x wrote it (gemma-3-1b-it): every sliding_window_pattern-th layer
// global, the rest sliding with rope_local_base_freq and no scaling; as transformers 5 writes it,
// layer_types and rope_parameters per layer type.
TEST(ModelConfig, Gemma3LayerPatternAndPerLayerRope) {
  json v4 = base_config();
  v4["architectures"] = {"Gemma3ForCausalLM"};
  v4["model_type"] = "gemma3_text";
  v4["num_hidden_layers"] = 7;
  v4["sliding_window"] = 512;
  v4["sliding_window_pattern"] = 3;
  v4["rope_theta"] = 1000000.0;
  v4["rope_local_base_freq"] = 10000.0;
  v4["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  const ModelConfig a = ModelConfig::from_json(v4, "config.json");
  for (int i = 0; i < 7; ++i) {
    const bool global = i == 2 || i == 5;
    EXPECT_EQ(a.layers[i].attention, global ? AttentionKind::Full : AttentionKind::Sliding) << i;
    EXPECT_EQ(a.layers[i].sliding_window, global ? 0 : 512) << i;
    EXPECT_EQ(a.rope_of(i).theta, global ? 1e6 : 1e4) << i;
    EXPECT_EQ(a.rope_of(i).type, global ? "linear" : "default") << i;
    EXPECT_EQ(a.rope_of(i).factor, global ? 8.0 : 1.0) << i;
  }
  json v5 = base_config();
  v5["model_type"] = "gemma3_text";
  v5["sliding_window"] = 8;
  v5["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  v5["rope_parameters"] = {
      {"full_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  const ModelConfig b = ModelConfig::from_json(v5, "config.json");
  EXPECT_EQ(b.rope_of(0).theta, 1e4);
  EXPECT_EQ(b.rope_of(1).theta, 1e6);
  EXPECT_EQ(b.layers[1].attention, AttentionKind::Full);
  v4["rope_local_base_freq"] = -1.0;
  EXPECT_NE(error_of(v4).find("'rope_theta' is -1"), std::string::npos) << error_of(v4);
  v4["rope_local_base_freq"] = 10000.0;
  v4["sliding_window_pattern"] = -2;
  EXPECT_NE(error_of(v4).find("sliding_window_pattern must be positive, got -2"), std::string::npos)
      << error_of(v4);
}

// gpt-oss's YaRN keeps the correction range unrounded (rope_scaling.truncate: false).
TEST(ModelConfig, YarnTruncateFlag) {
  json c = base_config();
  c["rope_scaling"] = {{"rope_type", "yarn"},
                       {"factor", 32.0},
                       {"truncate", false},
                       {"original_max_position_embeddings", 4096}};
  EXPECT_FALSE(ModelConfig::from_json(c, "config.json").rope.truncate);
  c["rope_scaling"].erase("truncate");
  EXPECT_TRUE(ModelConfig::from_json(c, "config.json").rope.truncate);
}

TEST(ModelConfig, RejectsMissingAndContradictoryFields) {
  json j = base_config();
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("missing required field 'hidden_size'"), std::string::npos)
      << error_of(j);
  j = base_config();
  j.erase("architectures");
  EXPECT_NE(error_of(j).find("architectures"), std::string::npos);
  j = base_config();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("multiple of num_key_value_heads"), std::string::npos) << error_of(j);
  j = base_config();
  j["layer_types"] = {"full_attention"};
  EXPECT_NE(error_of(j).find("num_hidden_layers is 3"), std::string::npos) << error_of(j);
  j = base_config();
  j["vocab_size"] = "big";
  EXPECT_NE(error_of(j).find("vocab_size"), std::string::npos) << error_of(j);
}

// A number no double holds (1e999) is a JSON error naming the file, not a bare exception.
TEST(ModelConfig, ANumberBeyondDoubleIsAnErrorNamingTheFile) {
  try {
    parse_json_lenient(R"({"rope_theta": 1e999})", "config.json in DIR");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json in DIR is not valid JSON"), std::string::npos)
        << e.what();
  }
}

}  // namespace strata
