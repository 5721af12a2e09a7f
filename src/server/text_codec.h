#pragma once
// What the server needs from a tokenizer: text -> ids, ids -> text, and the chat template.
// A model directory without a tokenizer serves token ids only (prompts as id arrays,
// outputs as `output_ids` / `token_ids`); requests that need text then get a 400 that says so.
#include <string>
#include <vector>

#include "model/json_util.h"

namespace strata {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  // The prompt for OpenAI chat `messages` with the assistant turn opened.
  virtual std::string apply_chat_template(const json& messages) const = 0;
};

}  // namespace strata
