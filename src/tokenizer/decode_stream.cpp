#include "tokenizer/decode_stream.h"

#include <span>

#include "core/error.h"

namespace strata::tok {

namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string DecodeStream::emit_from(const std::string& text) {
  // Decoders strata supports are prefix-stable over these windows; a violation is a bug here.
  STRATA_CHECK(text.compare(0, prefix_text_.size(), prefix_text_) == 0,
               "streamed decode window lost its prefix ('{}' vs '{}')", prefix_text_, text);
  std::string out = text.substr(prefix_text_.size());
  prefix_ = read_;
  read_ = ids_.size();
  prefix_text_ = tokenizer_.decode(std::span<const int>(ids_).subspan(prefix_, read_ - prefix_),
                                   skip_special_tokens_);
  return out;
}

std::string DecodeStream::step(int id) {
  if (id < 0 || id >= tokenizer_.vocab_size() || !tokenizer_.id_to_token(id))
    throw RequestError(fmt::format("token id {} is not in the tokenizer's vocabulary (size {})", id,
                                   tokenizer_.vocab_size()));
  ids_.push_back(id);
  // Hold at byte-fallback tokens and at special tokens being skipped (which vanish, so the
  // bytes on both sides can still join one run).
  if (tokenizer_.is_byte_fallback(id) || (skip_special_tokens_ && tokenizer_.is_special(id)))
    return "";
  const std::string text =
      tokenizer_.decode(std::span<const int>(ids_).subspan(prefix_), skip_special_tokens_);
  if (text.size() <= prefix_text_.size() || ends_with_replacement(text)) return "";
  return emit_from(text);
}

std::string DecodeStream::finish() {
  if (read_ == ids_.size()) return "";
  const std::string text =
      tokenizer_.decode(std::span<const int>(ids_).subspan(prefix_), skip_special_tokens_);
  return emit_from(text);
}

}  // namespace strata::tok
