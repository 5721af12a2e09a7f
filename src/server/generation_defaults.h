#pragma once
// The sampling defaults a request gets for the fields it leaves out. As vLLM's
// `--generation-config auto` and SGLang's `--sampling-defaults model` do, the model
// directory's generation_config.json supplies temperature, top_p, top_k, min_p,
// repetition_penalty and max_new_tokens (the model authors' recommended settings, e.g.
// Qwen3's temperature 0.6, top_p 0.95, top_k 20); without it, or with `openai` defaults,
// OpenAI's: temperature 1 and every filter off.
#include <optional>
#include <string>

#include "model/json_util.h"

namespace strata {

struct SamplingDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<int> max_new_tokens;  // none: the route's own default
  json source;                        // the fields taken from generation_config.json (logged)
};

// `model_dir`/generation_config.json's sampling fields over OpenAI's defaults (the file
// absent: OpenAI's). Fields of the wrong type or out of range are skipped with a warning,
// since the file comes with the model and a request can still set each field.
SamplingDefaults read_generation_defaults(const std::string& model_dir);

}  // namespace strata
