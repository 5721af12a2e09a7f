#pragma once
// Text of one request's output as its tokens arrive (incremental detokenization). The
// scheduler matches stop strings on it and the server streams it; both get theirs from the
// tokenizer the server loaded (server/tokenizer_codec.h), so the runtime needs no tokenizer.
#include <string>

namespace strata {

class TextStream {
 public:
  virtual ~TextStream() = default;
  // Adds one generated id; returns the text that became final with it (complete UTF-8 that
  // later ids cannot change; often empty while a character is incomplete).
  virtual std::string step(int id) = 0;
  // The text still held back (an unfinished character decodes as U+FFFD). Everything step()
  // and finish() returned, concatenated, is the decode of all ids.
  virtual std::string finish() = 0;
};

}  // namespace strata
