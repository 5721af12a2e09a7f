#include "model/config_checks.h"

#include <cmath>

#include "core/error.h"

namespace strata {

namespace {

enum class Shape { String, Bool, Object, NumberList, LimitList, StringList, IntList, IntOrIntList };

const char* describe(Shape s) {
  switch (s) {
    case Shape::String:
      return "a string";
    case Shape::Bool:
      return "true or false";
    case Shape::Object:
      return "an object";
    case Shape::NumberList:
      return "a list of finite numbers";
    case Shape::LimitList:
      return "a list of numbers (Infinity allowed)";
    case Shape::StringList:
      return "a list of strings";
    case Shape::IntList:
      return "a list of integers";
    case Shape::IntOrIntList:
      return "an integer or a list of integers";
  }
  return "";
}

bool is_finite_number(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>());
}

bool all_of(const json& v, bool (*pred)(const json&)) {
  if (!v.is_array()) return false;
  for (const auto& x : v)
    if (!pred(x)) return false;
  return true;
}

bool matches(const json& v, Shape s) {
  switch (s) {
    case Shape::String:
      return v.is_string();
    case Shape::Bool:
      return v.is_boolean();
    case Shape::Object:
      return v.is_object();
    case Shape::NumberList:
      return all_of(v, is_finite_number);
    case Shape::LimitList:
      return all_of(v, [](const json& x) {
        return x.is_number() || (x.is_object() && x.contains("__float__"));
      });
    case Shape::StringList:
      return all_of(v, [](const json& x) { return x.is_string(); });
    case Shape::IntList:
      return all_of(v, [](const json& x) { return x.is_number_integer(); });
    case Shape::IntOrIntList:
      return v.is_number_integer() ||
             all_of(v, [](const json& x) { return x.is_number_integer(); });
  }
  return false;
}

struct FieldShape {
  const char* key;
  Shape shape;
};

// Every structured field some family reads (numbers are checked where they are read).
constexpr FieldShape kFieldShapes[] = {
    {"model_type", Shape::String},          {"hidden_act", Shape::String},
    {"hidden_activation", Shape::String},   {"tie_word_embeddings", Shape::Bool},
    {"attention_bias", Shape::Bool},        {"mlp_bias", Shape::Bool},
    {"use_sliding_window", Shape::Bool},    {"rope_scaling", Shape::Object},
    {"rope_parameters", Shape::Object},     {"layers_block_type", Shape::StringList},
    {"layer_types", Shape::StringList},     {"hybrid_override_pattern", Shape::String},
    {"attn_layer_indices", Shape::IntList}, {"eos_token_id", Shape::IntOrIntList},
    {"mlp_multipliers", Shape::NumberList}, {"ssm_multipliers", Shape::NumberList},
    {"time_step_limit", Shape::LimitList},
};

void check_range(const std::string& source, const char* key, double v, bool ok,
                 const char* allowed) {
  if (!ok) fail("{}: field '{}' is {}, but must be {}; fix config.json", source, key, v, allowed);
}

}  // namespace

void check_config_field_types(const json& cfg, const std::string& source) {
  for (const auto& f : kFieldShapes) {
    auto it = cfg.find(f.key);
    if (it == cfg.end() || it->is_null()) continue;
    if (!matches(*it, f.shape))
      fail("{}: field '{}' should be {} but is {}; fix config.json", source, f.key,
           describe(f.shape), it->dump());
  }
  if (auto it = cfg.find("time_step_limit"); it != cfg.end() && it->is_array() && it->size() != 2)
    fail("{}: field 'time_step_limit' should be [min, max] but is {}; fix config.json", source,
         it->dump());
}

// Rope settings (both the global layers' and the sliding layers' where they differ).
static void check_rope(const std::string& source, const RopeConfig& r) {
  check_range(source, "rope_theta", r.theta, std::isfinite(r.theta) && r.theta > 0,
              "a finite number > 0");
  check_range(source, "factor (rope scaling)", r.factor, std::isfinite(r.factor) && r.factor > 0,
              "a finite number > 0");
  check_range(source, "partial_rotary_factor", r.partial_rotary_factor,
              r.partial_rotary_factor > 0 && r.partial_rotary_factor <= 1, "in (0, 1]");
  check_range(source, "low_freq_factor (rope scaling)", r.low_freq_factor,
              std::isfinite(r.low_freq_factor) && r.low_freq_factor > 0, "a finite number > 0");
  check_range(source, "high_freq_factor (rope scaling)", r.high_freq_factor,
              std::isfinite(r.high_freq_factor) && r.high_freq_factor > 0, "a finite number > 0");
  check_range(
      source, "original_max_position_embeddings (rope scaling)", r.original_max_position_embeddings,
      std::isfinite(r.original_max_position_embeddings) && r.original_max_position_embeddings >= 0,
      "a finite number >= 0");
  check_range(source, "beta_fast (rope scaling)", r.beta_fast, std::isfinite(r.beta_fast),
              "a finite number");
  check_range(source, "beta_slow (rope scaling)", r.beta_slow, std::isfinite(r.beta_slow),
              "a finite number");
}

void check_config_ranges(const ModelConfig& c, const std::string& source) {
  const auto size = [&](const char* key, int v, int lo, int hi) {
    if (v < lo || v > hi)
      fail("{}: field '{}' is {}, but must be in {}..{}; fix config.json", source, key, v, lo, hi);
  };
  size("vocab_size", c.vocab_size, 1, kMaxConfigVocab);
  size("hidden_size", c.hidden_size, 1, kMaxConfigWidth);
  size("num_hidden_layers", c.num_layers, 1, kMaxConfigLayers);
  size("intermediate_size", c.intermediate_size, 0, kMaxConfigWidth);
  size("num_attention_heads", c.num_attention_heads, 0, kMaxConfigHeads);
  size("num_key_value_heads", c.num_kv_heads, 0, kMaxConfigHeads);
  size("head_dim", c.head_dim, 0, kMaxConfigHeads);
  if (c.max_position_embeddings < 0)
    fail(
        "{}: field 'max_position_embeddings' is {}, but must be positive (or left out); fix "
        "config.json",
        source, c.max_position_embeddings);
  check_range(source, "rms_norm_eps", c.rms_norm_eps,
              std::isfinite(c.rms_norm_eps) && c.rms_norm_eps >= 0, "a finite number >= 0");
  check_rope(source, c.rope);
  check_rope(source, c.sliding_rope);
}

}  // namespace strata
