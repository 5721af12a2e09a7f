#pragma once
// Incremental detokenization for streaming: feed ids one at a time and get back only text
// that is final, i.e. complete UTF-8 that later ids cannot change. The concatenation of
// everything step() and finish() return equals tokenizer.decode(all ids).
//
// Method (as Hugging Face's DecodeStream): decode a short window of recent ids twice, with
// and without the newest ones, and emit the difference once it does not end in U+FFFD (an
// unfinished character). Windows begin at ids that were emitted whole, so decoders that act
// on the first token (SentencePiece's leading-space Strip) see the same context as in a full
// decode. A window never ends at a byte-fallback token (<0xNN>) or a skipped special token,
// because Hugging Face decodes a run of byte tokens as a unit (an invalid run becomes one
// U+FFFD per byte) and skipped tokens let the runs around them join.
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace strata::tok {

class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Adds one id; returns the newly final text (often empty while a character is incomplete).
  std::string step(int id);
  // Returns whatever is still held back (an unfinished character decodes as U+FFFD).
  std::string finish();

 private:
  std::string emit_from(const std::string& text);

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int> ids_;
  size_t prefix_ = 0;        // window start
  size_t read_ = 0;          // end of what has been emitted
  std::string prefix_text_;  // decode(ids_[prefix_, read_))
};

}  // namespace strata::tok
