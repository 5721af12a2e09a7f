#pragma once
// Regular expressions compiled into grammar rules (the same pushdown form as EBNF and JSON
// schemas). The whole pattern must match (leading ^ and trailing $ are accepted and implied).
//
// Supported: literals, ., [...] classes with ranges and negation, \d \w \s \D \W \S, escapes
// (\n \t \r \f \v \0 \xHH \uHHHH \u{H...}), groups (...) (?:...) (?<name>...), alternation,
// * + ? {n} {n,} {n,m} (lazy forms match the same strings). Not supported, and rejected by
// name: backreferences, lookaround, word boundaries, inline flags.
#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace strata::grammar {

struct RegexOptions {
  // Inside a JSON string: characters that JSON must escape (", \, U+0000-U+001F) are left out
  // of every class and rejected as literals, so that the match is emitted verbatim and the
  // decoded string equals the matched text.
  bool json_string = false;
};

// Returns the rule that matches exactly the strings of `pattern`. Throws GrammarError.
uint32_t compile_regex(GrammarBuilder& builder, std::string_view pattern,
                       const RegexOptions& options = {});

// e{lo,hi} as a sequence (hi < 0: unbounded), shared with the EBNF parser.
std::vector<Element> repeat_element(GrammarBuilder& builder, Element e, int lo, int hi);

}  // namespace strata::grammar
