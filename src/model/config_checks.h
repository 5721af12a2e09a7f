#pragma once
// The range and type rules of config.json fields, in one place: ModelConfig::from_json runs
// them before anything is sized from the config, so a bad value is one error naming the
// file, the field, the value and the allowed range, never a huge allocation or NaN logits.
#include <string>

#include "model/config.h"

namespace strata {

// Largest sizes strata accepts: far above any published model, small enough that products of
// two of them fit an int64 and that no per-layer table grows without bound.
inline constexpr int kMaxConfigLayers = 4096;
inline constexpr int kMaxConfigVocab = 1 << 24;
inline constexpr int kMaxConfigWidth = 1 << 20;  // hidden, intermediate sizes
inline constexpr int kMaxConfigHeads = 4096;     // attention heads, KV heads, head_dim

// Fields of a structured type (lists, objects, strings, booleans) that families read: a value
// of another type is an error instead of a silent fallback to the default.
void check_config_field_types(const json& cfg, const std::string& source);

// The parsed values' ranges (sizes, rope, norm epsilon, positions).
void check_config_ranges(const ModelConfig& c, const std::string& source);

}  // namespace strata
