#include "server/tokenizer_codec.h"

#include <filesystem>

#include "core/error.h"
#include "runtime/eos_tokens.h"
#include "server/request_parsing.h"
#include "tokenizer/decode_stream.h"

namespace strata {

namespace {

// DecodeStream over the ids the tokenizer knows. A model may have more ids than its tokenizer
// (vocab_size is often padded); Hugging Face's decode drops such ids, and so does this.
class CodecTextStream : public TextStream {
 public:
  CodecTextStream(const tok::Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), stream_(tokenizer, skip_special_tokens) {}
  std::string step(int id) override {
    if (id < 0 || id >= tokenizer_.vocab_size() || !tokenizer_.id_to_token(id)) return "";
    return stream_.step(id);
  }
  std::string finish() override { return stream_.finish(); }

 private:
  const tok::Tokenizer& tokenizer_;
  tok::DecodeStream stream_;
};

}  // namespace

std::unique_ptr<TokenizerCodec> TokenizerCodec::load(const std::string& dir,
                                                     const std::string& chat_template) {
  std::unique_ptr<TokenizerCodec> codec(new TokenizerCodec(dir, tok::Tokenizer::load(dir)));
  codec->eos_token_id_ = tokenizer_eos_token_id(codec->tokenizer_, dir);
  if (!chat_template.empty()) {
    codec->chat_.emplace(tok::ChatTemplate::load(dir, chat_template));
    return codec;
  }
  try {
    codec->chat_.emplace(tok::ChatTemplate::load(dir));
  } catch (const Error& e) {
    codec->chat_problem_ = e.what();
  }
  return codec;
}

TokenizerCodec::TokenizerCodec(std::string dir, tok::Tokenizer tokenizer)
    : dir_(std::move(dir)), tokenizer_(std::move(tokenizer)) {}

bool TokenizerCodec::known(int id) const {
  return id >= 0 && id < tokenizer_.vocab_size() && tokenizer_.id_to_token(id).has_value();
}

std::vector<int> TokenizerCodec::encode(const std::string& text, bool add_special_tokens) const {
  return tokenizer_.encode(text, add_special_tokens);
}

std::string TokenizerCodec::decode(const std::vector<int>& ids, bool skip_special_tokens) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int id : ids)
    if (known(id)) kept.push_back(id);
  return tokenizer_.decode(kept, skip_special_tokens);
}

std::unique_ptr<TextStream> TokenizerCodec::stream(bool skip_special_tokens) const {
  return std::make_unique<CodecTextStream>(tokenizer_, skip_special_tokens);
}

std::string TokenizerCodec::token_text(int id) const {
  return known(id) ? tokenizer_.decode(std::vector<int>{id}, false) : "";
}

std::string TokenizerCodec::apply_chat_template(const ordered_json& messages,
                                                const ordered_json& extra) const {
  if (!chat_)
    throw HttpError(400,
                    fmt::format("the tokenizer at {} has no usable chat template ({}); use "
                                "/v1/completions, or start the server with --tokenizer-path DIR "
                                "of a tokenizer that has one",
                                dir_, chat_problem_),
                    "messages");
  try {
    return chat_->render(messages, /*add_generation_prompt=*/true, extra);
  } catch (const Error& e) {
    throw HttpError(400,
                    fmt::format("the chat template cannot render these messages: {}", e.what()),
                    "messages");
  }
}

}  // namespace strata
