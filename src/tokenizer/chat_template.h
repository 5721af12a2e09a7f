#pragma once
// The chat template of a Hugging Face model directory (tokenizer_config.json "chat_template",
// or chat_template.jinja), rendered the way transformers' apply_chat_template does: variables
// `messages`, `add_generation_prompt`, `tools` and `documents` (None unless given), and the
// special tokens (bos_token, eos_token, ...) as strings.
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tokenizer/jinja.h"

namespace strata::tok {

class ChatTemplate {
 public:
  // Reads tokenizer_config.json (and chat_template.jinja if present) from `dir`.
  // `chosen` (--chat-template, as vLLM's and SGLang's): a file holding a template, or the
  // name of one of tokenizer_config.json's named templates (e.g. "tool_use"); empty: the
  // directory's default.
  static ChatTemplate load(const std::string& dir, const std::string& chosen = "");
  // `config` is the parsed tokenizer_config.json (for the special tokens).
  ChatTemplate(const std::string& source, const nlohmann::json& config);

  // `messages`: [{"role": ..., "content": ...}, ...]. `extra`: more variables (e.g. tools,
  // enable_thinking), overriding the defaults. Ordered JSON, so that objects reach the
  // template (and its `tojson`) with their keys in the order the client wrote them.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // strftime_now() reads this time instead of the clock, so that a template printing today's
  // date renders the same on any day (the reference renderings of tools/make_template_refs.py
  // fix the clock the same way).
  void fix_clock(const std::tm& local_time) { fixed_clock_ = local_time; }

 private:
  jinja::Template template_;
  jinja::Dict special_tokens_;
  std::optional<std::tm> fixed_clock_;
};

}  // namespace strata::tok
