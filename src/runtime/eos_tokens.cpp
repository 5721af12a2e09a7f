#include "runtime/eos_tokens.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "model/json_util.h"

namespace strata {

namespace fs = std::filesystem;

std::optional<int> tokenizer_eos_token_id(const tok::Tokenizer& tokenizer,
                                          const std::string& tokenizer_dir) {
  const fs::path path = fs::path(tokenizer_dir) / "tokenizer_config.json";
  if (!fs::exists(path)) return std::nullopt;
  const json config = read_json_file(path.string());
  if (!config.is_object()) return std::nullopt;
  json eos = config.value("eos_token", json());
  if (eos.is_object()) eos = eos.value("content", json());
  if (!eos.is_string()) return std::nullopt;
  return tokenizer.token_to_id(eos.get<std::string>());
}

std::vector<int> model_eos_token_ids(const ModelConfig& config, std::optional<int> tokenizer_eos) {
  std::vector<int> ids;
  auto add = [&](int id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (int id : config.eos_token_ids) add(id);
  const fs::path gen = fs::path(config.model_dir) / "generation_config.json";
  if (!config.model_dir.empty() && fs::exists(gen)) {
    const json g = read_json_file(gen.string());
    const json e = g.is_object() ? g.value("eos_token_id", json()) : json();
    auto add_json = [&](const json& x) {
      if (x.is_number_integer()) add(x.get<int>());
    };
    if (e.is_array())
      for (const auto& x : e) add_json(x);
    else
      add_json(e);
  }
  // A tokenizer of another model may name an id the model does not have.
  if (tokenizer_eos && *tokenizer_eos >= 0 && *tokenizer_eos < config.vocab_size)
    add(*tokenizer_eos);
  return ids;
}

}  // namespace strata
