#pragma once
// The server's TextCodec over strata's Hugging Face tokenizer (tokenizer.json) and chat
// template (tokenizer_config.json), loaded from the model directory or --tokenizer-path.
#include <optional>

#include "server/text_codec.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata {

class TokenizerCodec : public TextCodec {
 public:
  // Loads `dir` (tokenizer.json, and tokenizer_config.json when present). Fails with Error
  // when the tokenizer cannot be loaded; a missing or unreadable chat template only makes
  // chat requests fail (chat_template_problem() says why).
  // `chat_template`: --chat-template (ChatTemplate::load); a wrong one fails here.
  static std::unique_ptr<TokenizerCodec> load(const std::string& dir,
                                              const std::string& chat_template = "");

  std::vector<int> encode(const std::string& text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int>& ids, bool skip_special_tokens) const override;
  std::unique_ptr<TextStream> stream(bool skip_special_tokens) const override;
  std::string token_text(int id) const override;
  std::string apply_chat_template(const ordered_json& messages,
                                  const ordered_json& extra) const override;
  const std::string& source() const override { return dir_; }

  const tok::Tokenizer& tokenizer() const { return tokenizer_; }
  // tokenizer_config.json's eos_token, when it names a token of the vocabulary: chat models
  // end their turn with it (SGLang stops at it as at the model's EOS ids).
  std::optional<int> eos_token_id() const { return eos_token_id_; }
  const std::string& chat_template_problem() const { return chat_problem_; }

 private:
  TokenizerCodec(std::string dir, tok::Tokenizer tokenizer);
  bool known(int id) const;

  std::string dir_;
  tok::Tokenizer tokenizer_;
  std::optional<tok::ChatTemplate> chat_;
  std::string chat_problem_;
  std::optional<int> eos_token_id_;
};

}  // namespace strata
