#include "server/request_fields.h"

#include <fmt/format.h>

#include <climits>
#include <mutex>

#include "core/log.h"
#include "server/request_parsing.h"

namespace strata {

namespace {

// OpenAI, vLLM and SGLang fields that change nothing strata returns (bookkeeping, hints about
// latency or storage, options of features that are off), with the JSON type each must have.
enum class Kind { any, boolean, string, object, number };
const std::map<std::string, Kind>& harmless_fields() {
  static const std::map<std::string, Kind> fields = {
      {"user", Kind::string},
      {"metadata", Kind::object},
      {"store", Kind::boolean},
      {"service_tier", Kind::string},
      {"reasoning_effort", Kind::string},
      {"parallel_tool_calls", Kind::boolean},
      {"prediction", Kind::object},
      {"modalities", Kind::any},
      {"request_id", Kind::string},
      {"priority", Kind::number},
      {"stream_interval", Kind::number},
      {"no_stop_trim", Kind::boolean},
      {"spaces_between_special_tokens", Kind::boolean},
      {"return_hidden_states", Kind::boolean},
      {"log_metrics", Kind::boolean},
      {"custom_params", Kind::any},
      {"lora_path", Kind::any},
  };
  return fields;
}

// Fields that would change the answer, which strata does not do; each with what to do instead.
const std::map<std::string, std::string>& unsupported_fields() {
  static const std::map<std::string, std::string> fields = {
      {"structural_tag", "structural tags are not supported; use response_format json_schema"},
      {"guided_json", "use response_format json_schema (or json_schema in sampling_params)"},
      {"guided_regex", "use regex"},
      {"guided_choice", "use regex with alternatives, e.g. \"(yes|no)\""},
      {"guided_grammar", "use ebnf (GBNF notation)"},
      {"stop_regex", "stop strings are matched literally; use 'stop'"},
      {"prompt_logprobs",
       "vLLM's prompt_logprobs is not read; prompt logprobs come with 'echo': true and "
       "'logprobs' on /v1/completions, or with 'logprob_start_len' on /generate"},
      {"return_text_in_logprobs_list", "not supported"},
      {"audio", "audio output is not supported"},
      {"image_data", "images are not supported"},
      {"allowed_token_ids", "not supported; use logit_bias"},
      {"bad_words", "not supported; use logit_bias"},
  };
  return fields;
}

bool has_value(const json& obj, const std::string& key) {
  const auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

bool of_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::boolean:
      return v.is_boolean();
    case Kind::string:
      return v.is_string();
    case Kind::object:
      return v.is_object();
    case Kind::number:
      return v.is_number();
    case Kind::any:
      return true;
  }
  return true;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::boolean:
      return "true or false";
    case Kind::string:
      return "a string";
    case Kind::object:
      return "an object";
    case Kind::number:
      return "a number";
    case Kind::any:
      break;
  }
  return "anything";
}

// Each unknown field name once per process: a client sends the same ones with every request.
void note_unknown(const std::string& key, const std::string& where) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (seen.size() > 1000 || !seen.insert(where + "/" + key).second) return;
  }
  log::debug("ignoring the unknown field '{}' in {} (and from now on without saying so)", key,
             where);
}

}  // namespace

void check_fields(const json& obj, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    if (known.count(key)) continue;
    if (const auto h = harmless_fields().find(key); h != harmless_fields().end()) {
      if (!value.is_null() && !of_kind(value, h->second))
        throw HttpError(400, fmt::format("'{}' must be {}", key, kind_name(h->second)), key);
      continue;
    }
    if (const auto u = unsupported_fields().find(key); u != unsupported_fields().end()) {
      if (value.is_null()) continue;
      throw HttpError(400, fmt::format("'{}' is not supported by this server: {}", key, u->second),
                      key);
    }
    note_unknown(key, where);
  }
}

std::vector<std::pair<int, float>> read_logit_bias(const json& obj) {
  if (!has_value(obj, "logit_bias")) return {};
  const json& lb = obj["logit_bias"];
  if (!lb.is_object())
    throw HttpError(400, "'logit_bias' must be an object mapping token ids to biases",
                    "logit_bias");
  std::vector<std::pair<int, float>> out;
  for (const auto& [key, value] : lb.items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || key.empty() || id < 0 || id > INT32_MAX)
      throw HttpError(400, fmt::format("'logit_bias' keys must be token ids, got '{}'", key),
                      "logit_bias");
    if (!value.is_number())
      throw HttpError(400, fmt::format("'logit_bias' of token {} must be a number", key),
                      "logit_bias");
    out.emplace_back(static_cast<int>(id), value.get<float>());
  }
  return out;
}

SamplingParams read_sampling_controls(const json& obj, const std::string& min_tokens_key,
                                      const SamplingDefaults& defaults) {
  SamplingParams p;
  auto number = [&](const char* key, float fallback) {
    return static_cast<float>(get_number(obj, key).value_or(fallback));
  };
  p.temperature = number("temperature", defaults.temperature);
  p.top_p = number("top_p", defaults.top_p);
  const int64_t top_k = get_integer(obj, "top_k").value_or(defaults.top_k);  // SGLang's -1: off
  p.top_k = top_k < 0 ? 0 : static_cast<int>(std::min<int64_t>(top_k, INT32_MAX));
  p.min_p = number("min_p", defaults.min_p);
  p.presence_penalty = number("presence_penalty", 0.0f);
  p.frequency_penalty = number("frequency_penalty", 0.0f);
  p.repetition_penalty = number("repetition_penalty", defaults.repetition_penalty);
  const int64_t min_tokens = get_integer(obj, min_tokens_key).value_or(0);
  if (min_tokens < 0)
    throw HttpError(400, fmt::format("'{}' must be >= 0, got {}", min_tokens_key, min_tokens),
                    min_tokens_key);
  p.min_new_tokens = static_cast<int>(std::min<int64_t>(min_tokens, INT32_MAX));
  p.logit_bias = read_logit_bias(obj);
  if (has_value(obj, "stop_token_ids"))
    p.stop_token_ids = to_token_ids(obj["stop_token_ids"], "stop_token_ids");
  p.stop_at_eos = !get_bool(obj, "ignore_eos").value_or(false);
  return p;
}

}  // namespace strata
