// libFuzzer target: config.json (the non-finite literal rewrite, parsing, ModelConfig with its
// range and type checks, the per-layer classification). Anything but a strata Error is a bug.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const strata::json cfg = strata::parse_json_lenient(text, "config.json");
    const strata::ModelConfig c = strata::ModelConfig::from_json(cfg, "config.json");
    if (static_cast<int>(c.layers.size()) != c.num_layers) __builtin_trap();
    (void)c.attention_layer_ids();
    (void)c.recurrent_layer_ids();
  } catch (const strata::Error&) {
  }
  return 0;
}
