#pragma once
// Helpers for the grammar tests: a byte vocabulary (every single byte is a token, so matching
// a token is matching a byte) and a full-match check.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace strata::grammar::test {

inline std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  static const auto vocab = [] {
    std::vector<std::optional<std::string>> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    return std::make_shared<const TokenVocabulary>(std::move(bytes));
  }();
  return vocab;
}

inline std::shared_ptr<CompiledGrammar> compile_for_bytes(Grammar g) {
  return std::make_shared<CompiledGrammar>(std::move(g), byte_vocabulary());
}

// The engine's verdict: `text` is a complete match of the grammar.
inline bool full_match(const std::shared_ptr<CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_finish();
}

}  // namespace strata::grammar::test
