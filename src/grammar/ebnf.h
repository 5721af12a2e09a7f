#pragma once
// EBNF grammars in llama.cpp's GBNF notation, compiled straight into the grammar form:
//
//   root   ::= object                 # rule definitions; `root` is the start rule
//   object ::= "{" pair ("," pair)* "}"
//   pair   ::= name ":" [0-9]+ | name ":" "\"" [^"]* "\""
//   name   ::= /[a-z_]+/              # a regex (regex_rules.h) between slashes
//
// Terminals: "double" or 'single' quoted strings (escapes \n \t \r \\ \" \' \xHH \uHHHH
// \UHHHHHHHH), [character classes] with ranges and ^ negation, . (any character), /regex/.
// Operators: juxtaposition, |, ( ), postfix * + ? {n} {n,} {n,m}. Comments run from # to the
// end of the line. Rules end where the next `name ::=` begins, so line breaks are free.
// Strings and classes are UTF-8 text (a class matches whole characters).
#include <string_view>

#include "grammar/grammar.h"

namespace strata::grammar {

// Adds the rules of `text` to `builder` (rules already declared there may be referenced).
void add_ebnf_rules(GrammarBuilder& builder, std::string_view text);

// Throws GrammarError naming the line and what was expected.
Grammar compile_ebnf(std::string_view text, std::string_view root = "root");

}  // namespace strata::grammar
