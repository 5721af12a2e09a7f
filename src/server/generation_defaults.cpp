#include "server/generation_defaults.h"

#include <algorithm>
#include <filesystem>

#include "core/log.h"

namespace strata {

SamplingDefaults read_generation_defaults(const std::string& model_dir) {
  namespace fs = std::filesystem;
  SamplingDefaults d;
  d.source = json::object();
  const fs::path file = fs::path(model_dir) / "generation_config.json";
  if (model_dir.empty() || !fs::exists(file)) return d;
  json g;
  try {
    g = read_json_file(file.string());
  } catch (const std::exception&) {
    g = nullptr;
  }
  if (!g.is_object()) {
    log::warning("{} is not a JSON object; using OpenAI's sampling defaults", file.string());
    return d;
  }
  // Each field with its allowed range: a value outside it is the file's mistake, not the
  // request's, so it is skipped (and said) rather than failing every request.
  auto take = [&](const char* key, double lo, double hi, auto& field) {
    const auto it = g.find(key);
    if (it == g.end() || it->is_null()) return;
    if (!it->is_number() || it->get<double>() < lo || it->get<double>() > hi) {
      log::warning("{}: '{}' = {} is not a number in [{}, {}]; ignored", file.string(), key,
                   it->dump(), lo, hi);
      return;
    }
    field = static_cast<std::remove_reference_t<decltype(field)>>(it->get<double>());
    d.source[key] = *it;
  };
  take("temperature", 0.0, 1e6, d.temperature);
  take("top_p", 1e-9, 1.0, d.top_p);
  take("top_k", -1.0, 2147483647.0, d.top_k);  // -1 and 0 both mean off
  d.top_k = std::max(d.top_k, 0);
  take("min_p", 0.0, 1.0, d.min_p);
  take("repetition_penalty", 1e-9, 1e6, d.repetition_penalty);
  int max_new = 0;
  take("max_new_tokens", 1.0, 2147483647.0, max_new);
  if (max_new > 0) d.max_new_tokens = max_new;
  return d;
}

}  // namespace strata
