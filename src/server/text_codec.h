#pragma once
// What the server needs from a tokenizer: text -> ids, ids -> text (whole, or incrementally
// as tokens arrive), token strings for logprobs, and the chat template. A server without a
// tokenizer (ServerContext::codec null) serves token ids only: prompts as id lists, outputs
// as `output_ids` / `token_ids`; requests that need text get a 400 naming --tokenizer-path.
#include <memory>
#include <string>
#include <vector>

#include "model/json_util.h"
#include "runtime/text_stream.h"

namespace strata {

// JSON that keeps object keys in the order they were written (chat messages and tools, for
// the chat template's `tojson`).
using ordered_json = nlohmann::ordered_json;

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // Throws RequestError for text that is not UTF-8.
  virtual std::vector<int> encode(const std::string& text, bool add_special_tokens) const = 0;
  // Ids the tokenizer does not know decode to nothing (as Hugging Face's decode drops them).
  virtual std::string decode(const std::vector<int>& ids, bool skip_special_tokens) const = 0;
  // Incremental decoding: the concatenated pieces equal decode() of all ids.
  virtual std::unique_ptr<TextStream> stream(bool skip_special_tokens) const = 0;
  // One token as logprobs show it (special tokens by name; part of a character as U+FFFD).
  virtual std::string token_text(int id) const = 0;
  // The prompt for OpenAI chat `messages` with the assistant turn opened; `extra` holds more
  // template variables (chat_template_kwargs). Throws HttpError (400) when there is no chat
  // template or it rejects the messages. Ordered: `tojson` writes keys as the client did.
  virtual std::string apply_chat_template(const ordered_json& messages,
                                          const ordered_json& extra) const = 0;
  // Where the tokenizer came from, for messages.
  virtual const std::string& source() const = 0;
};

}  // namespace strata
