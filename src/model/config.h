#pragma once
// ModelConfig: one normalized description of a Hugging Face model directory's config.json.
// Accepts both transformers 4.x spellings (rope_theta / rope_scaling,
// hybrid_override_pattern) and 5.x ones (rope_parameters, layers_block_type, layer_types).
// Family-specific fields stay in `raw` and are read through the typed accessors, which name
// the missing field and the architecture that needs it.
#include <optional>
#include <string>
#include <vector>

#include "model/json_util.h"
#include "model/layer_spec.h"

namespace strata {

struct RopeConfig {
  std::string type = "default";  // default | linear | llama3 | yarn | dynamic
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  double original_max_position_embeddings = 0;  // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;     // yarn
  bool truncate = true;  // yarn: round the correction range to whole dims (gpt-oss: false)
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn (DeepSeek); 0 = not given
  std::optional<double> attention_factor;     // yarn override
  double partial_rotary_factor = 1.0;
};

struct ModelConfig {
  std::string model_dir;
  std::string architecture;
  std::string model_type;

  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  int sliding_window = 0;  // the window of sliding layers, 0 when none

  RopeConfig rope;          // full-attention layers (and every layer of single-rope models)
  RopeConfig sliding_rope;  // sliding-window layers: Gemma 3 gives them their own base
  std::vector<int> eos_token_ids;
  int bos_token_id = -1;

  std::vector<LayerSpec> layers;  // one per decoder layer, global layer id = index
  json raw;                       // config.json after the Infinity rewrite

  // Reads DIR/config.json; validates the fields every family needs.
  static ModelConfig load(const std::string& model_dir);
  static ModelConfig from_json(const json& cfg, const std::string& source);

  // Family-specific fields. `require_*` fails with a message naming field and architecture.
  int require_int(const std::string& key) const;
  double require_number(const std::string& key) const;
  int get_int(const std::string& key, int fallback) const;
  double get_number(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  // The rope settings of layer `layer_id` (sliding layers may have their own).
  const RopeConfig& rope_of(int layer_id) const;
  std::vector<int> attention_layer_ids() const;
  std::vector<int> recurrent_layer_ids() const;
};

// Parses rope settings from either spelling: rope_parameters (5.x) or rope_theta +
// rope_scaling (4.x). `layer_type` picks a per-layer-type entry where the config has them.
RopeConfig parse_rope_config(const json& cfg, const std::string& layer_type = "full_attention");

// Layer classification, one entry per family, in layer_kinds.cpp.
std::vector<LayerSpec> classify_layers(const ModelConfig& cfg);

}  // namespace strata
