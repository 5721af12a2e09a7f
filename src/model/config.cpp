#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "model/config_checks.h"

namespace strata {

namespace {

// An integer field: missing or null gives `fallback`; a value that is not a whole number, or
// that an int cannot hold, is an error naming the field, the file and the value.
int int_field(const json& cfg, const std::string& key, int fallback, const std::string& source) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_number() || it->get<double>() != std::floor(it->get<double>()))
    fail("{}: field '{}' should be an integer but is {}; fix config.json", source, key, it->dump());
  const double v = it->get<double>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    fail("{}: field '{}' is {}, outside the range strata reads ({}..{}); fix config.json", source,
         key, it->dump(), std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  return static_cast<int>(v);
}

// A number field (also the Infinity spellings), with the file named when it is of another type.
std::optional<double> number_field(const json& obj, const std::string& key,
                                   const std::string& source) {
  try {
    return json_number(obj, key);
  } catch (const Error& e) {
    fail("{}: {}; fix config.json", source, e.what());
  }
}

void read_rope_entry(const json& e, RopeConfig* r) {
  if (e.contains("rope_type") && e["rope_type"].is_string())
    r->type = e["rope_type"];
  else if (e.contains("type") && e["type"].is_string())
    r->type = e["type"];
  if (auto v = json_number(e, "rope_theta")) r->theta = *v;
  if (auto v = json_number(e, "factor")) r->factor = *v;
  if (auto v = json_number(e, "low_freq_factor")) r->low_freq_factor = *v;
  if (auto v = json_number(e, "high_freq_factor")) r->high_freq_factor = *v;
  if (auto v = json_number(e, "original_max_position_embeddings"))
    r->original_max_position_embeddings = *v;
  if (auto v = json_number(e, "beta_fast")) r->beta_fast = *v;
  if (auto v = json_number(e, "beta_slow")) r->beta_slow = *v;
  if (e.contains("truncate") && e["truncate"].is_boolean()) r->truncate = e["truncate"];
  if (auto v = json_number(e, "mscale")) r->mscale = *v;
  if (auto v = json_number(e, "mscale_all_dim")) r->mscale_all_dim = *v;
  if (auto v = json_number(e, "attention_factor")) r->attention_factor = *v;
  if (auto v = json_number(e, "partial_rotary_factor")) r->partial_rotary_factor = *v;
}

}  // namespace

RopeConfig parse_rope_config(const json& cfg, const std::string& layer_type) {
  RopeConfig r;
  if (auto v = json_number(cfg, "rope_theta")) r.theta = *v;
  if (auto v = json_number(cfg, "partial_rotary_factor")) r.partial_rotary_factor = *v;
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object())
    read_rope_entry(cfg["rope_scaling"], &r);
  if (cfg.contains("rope_parameters") && cfg["rope_parameters"].is_object()) {
    const json& p = cfg["rope_parameters"];
    // transformers 5 nests the parameters per layer type for models that mix them (Gemma 3).
    if (p.contains(layer_type) && p[layer_type].is_object())
      read_rope_entry(p[layer_type], &r);
    else if (!p.contains("full_attention"))
      read_rope_entry(p, &r);
  }
  // Gemma 3 as transformers 4.x spells it: sliding layers rotate with `rope_local_base_freq`
  // and no scaling; the global layers take rope_theta and rope_scaling.
  if (layer_type == "sliding_attention") {
    if (auto local = json_number(cfg, "rope_local_base_freq")) {
      const double partial = r.partial_rotary_factor;
      r = RopeConfig{};
      r.theta = *local;
      r.partial_rotary_factor = partial;
    }
  }
  if (r.type == "default" || r.type == "none") r.type = "default";
  return r;
}

ModelConfig ModelConfig::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(model_dir))
    fail("model directory '{}' does not exist: pass --model a Hugging Face model directory",
         model_dir);
  if (!fs::is_directory(model_dir))
    fail("--model '{}' is not a directory: pass the folder that holds config.json", model_dir);
  const std::string path = (fs::path(model_dir) / "config.json").string();
  if (!fs::exists(path))
    fail("'{}' has no config.json: is it a Hugging Face model directory?", model_dir);
  ModelConfig c = from_json(read_json_file(path), path);
  c.model_dir = model_dir;
  return c;
}

ModelConfig ModelConfig::from_json(const json& cfg, const std::string& source) {
  if (!cfg.is_object()) fail("{}: expected a JSON object at the top level", source);
  ModelConfig c;
  c.raw = cfg;
  check_config_field_types(cfg, source);
  if (!cfg.contains("architectures") || !cfg["architectures"].is_array() ||
      cfg["architectures"].empty() || !cfg["architectures"][0].is_string())
    fail("{}: missing required field 'architectures' (e.g. [\"LlamaForCausalLM\"])", source);
  c.architecture = cfg["architectures"][0];
  c.model_type = cfg.value("model_type", std::string());

  auto required = [&](const std::string& key) {
    if (!cfg.contains(key) || cfg[key].is_null())
      fail("{}: missing required field '{}' (needed by {})", source, key, c.architecture);
    const int v = int_field(cfg, key, -1, source);
    if (v <= 0) fail("{}: field '{}' is {}, but must be positive; fix config.json", source, key, v);
    return v;
  };
  c.vocab_size = required("vocab_size");
  c.hidden_size = required("hidden_size");
  // transformers 5 drops num_hidden_layers where a per-layer list (layers_block_type) implies it.
  for (const char* list : {"layers_block_type", "layer_types"})
    if (!cfg.contains("num_hidden_layers") && cfg.contains(list) && cfg[list].is_array())
      c.num_layers = static_cast<int>(cfg[list].size());
  if (c.num_layers == 0) c.num_layers = required("num_hidden_layers");
  c.intermediate_size = int_field(cfg, "intermediate_size", 0, source);
  c.num_attention_heads = int_field(cfg, "num_attention_heads", 0, source);
  c.num_kv_heads = int_field(cfg, "num_key_value_heads", c.num_attention_heads, source);
  c.head_dim = int_field(cfg, "head_dim", 0, source);
  if (c.head_dim == 0 && c.num_attention_heads > 0) {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(
          "{}: hidden_size {} is not divisible by num_attention_heads {} and no head_dim is "
          "given: set head_dim",
          source, c.hidden_size, c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.num_attention_heads > 0 && (c.num_kv_heads <= 0 || c.num_attention_heads % c.num_kv_heads))
    fail("{}: num_attention_heads {} must be a multiple of num_key_value_heads {}", source,
         c.num_attention_heads, c.num_kv_heads);
  c.max_position_embeddings = int_field(cfg, "max_position_embeddings", 0, source);
  if (auto v = number_field(cfg, "rms_norm_eps", source))
    c.rms_norm_eps = *v;
  else if (auto v2 = number_field(cfg, "layer_norm_epsilon", source))
    c.rms_norm_eps = *v2;
  else if (auto v3 = number_field(cfg, "norm_eps", source))
    c.rms_norm_eps = *v3;
  c.hidden_act = cfg.value("hidden_act", std::string("silu"));
  if (cfg.contains("hidden_activation") && cfg["hidden_activation"].is_string())
    c.hidden_act = cfg["hidden_activation"];
  c.tie_word_embeddings = cfg.value("tie_word_embeddings", false);
  c.attention_bias = cfg.value("attention_bias", false);
  c.mlp_bias = cfg.value("mlp_bias", false);
  const bool swa_disabled = cfg.contains("use_sliding_window") &&
                            cfg["use_sliding_window"].is_boolean() &&
                            !cfg["use_sliding_window"].get<bool>();
  c.sliding_window = swa_disabled ? 0 : int_field(cfg, "sliding_window", 0, source);
  if (c.sliding_window < 0)
    fail("{}: sliding_window must be positive, got {}", source, c.sliding_window);
  try {
    c.rope = parse_rope_config(cfg);
    c.sliding_rope = parse_rope_config(cfg, "sliding_attention");
  } catch (const Error& e) {
    fail("{}: {}; fix config.json", source, e.what());
  }
  // Sizes and numeric ranges, before the layer table or anything else is built from them.
  check_config_ranges(c, source);

  if (cfg.contains("eos_token_id")) {
    // An id or a list of ids (null: none). Anything else is refused, not skipped or wrapped:
    // a float or an id past INT_MAX would otherwise stop generation on the wrong token, or never.
    const json& e = cfg["eos_token_id"];
    auto add = [&](const json& x) {
      const bool id =
          (x.is_number_unsigned() && x.get<uint64_t>() <= INT32_MAX) ||
          (x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX);
      if (!id)
        fail(
            "{}: eos_token_id holds {}; each must be a token id (an integer in 0..{}); fix "
            "config.json",
            source, x.dump(), INT32_MAX);
      c.eos_token_ids.push_back(static_cast<int>(x.get<int64_t>()));
    };
    if (e.is_array())
      for (const auto& x : e) add(x);
    else if (!e.is_null())
      add(e);
  }
  c.bos_token_id = int_field(cfg, "bos_token_id", -1, source);

  c.layers = classify_layers(c);
  if (static_cast<int>(c.layers.size()) != c.num_layers)
    fail("{}: the layer layout describes {} layers but num_hidden_layers is {}", source,
         c.layers.size(), c.num_layers);
  if (!c.attention_layer_ids().empty() && (c.num_attention_heads <= 0 || c.head_dim <= 0))
    fail("{}: the model has attention layers but num_attention_heads is missing", source);
  return c;
}

int ModelConfig::require_int(const std::string& key) const {
  if (!raw.contains(key) || raw[key].is_null())
    fail(
        "config.json: missing required field '{}' (needed by {}); the checkpoint's config is "
        "incomplete",
        key, architecture);
  const int v = int_field(raw, key, -1, "config.json");
  if (v < 0)
    fail("config.json: field '{}' is {}, but must be >= 0 (needed by {}); fix config.json", key, v,
         architecture);
  return v;
}

double ModelConfig::require_number(const std::string& key) const {
  auto v = number_field(raw, key, "config.json");
  if (!v) fail("config.json: missing required field '{}' (needed by {})", key, architecture);
  return *v;
}

int ModelConfig::get_int(const std::string& key, int fallback) const {
  return int_field(raw, key, fallback, "config.json");
}

double ModelConfig::get_number(const std::string& key, double fallback) const {
  auto v = number_field(raw, key, "config.json");
  return v ? *v : fallback;
}

bool ModelConfig::get_bool(const std::string& key, bool fallback) const {
  auto it = raw.find(key);
  if (it == raw.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    fail("config.json: field '{}' should be true or false, got {}", key, it->dump());
  return it->get<bool>();
}

std::string ModelConfig::get_string(const std::string& key, const std::string& fallback) const {
  auto it = raw.find(key);
  if (it == raw.end() || it->is_null()) return fallback;
  if (!it->is_string())
    fail("config.json: field '{}' should be a string, got {}; fix config.json", key, it->dump());
  return it->get<std::string>();
}

const RopeConfig& ModelConfig::rope_of(int layer_id) const {
  const bool sliding = layer_id >= 0 && layer_id < static_cast<int>(layers.size()) &&
                       layers[layer_id].attention == AttentionKind::Sliding;
  return sliding ? sliding_rope : rope;
}

std::vector<int> ModelConfig::attention_layer_ids() const {
  return layer_ids_where(layers, [](const LayerSpec& l) { return l.has_kv_cache(); });
}

std::vector<int> ModelConfig::recurrent_layer_ids() const {
  return layer_ids_where(layers, [](const LayerSpec& l) { return l.has_recurrent_state(); });
}

}  // namespace strata
