#pragma once
// A constraint ready to decode with: the grammar, its automaton and its token-mask caches for
// one vocabulary, shared by every request that sends the same constraint (GrammarCompiler
// caches them by kind and text). GrammarMatcher is one request's position in it.
//
// The automaton's memo tables grow as requests explore it, so a CompiledGrammar serializes its
// users with a mutex; requests of one grammar share the work each one did.
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/stack_forest.h"
#include "grammar/token_masker.h"

namespace strata::grammar {

// What a request asks for. kind names the request field it came from.
struct GrammarSpec {
  enum class Kind { Regex, JsonSchema, Ebnf, JsonObject };
  Kind kind = Kind::JsonObject;
  std::string text;  // the regex, the schema as JSON text, or the EBNF
  bool operator==(const GrammarSpec&) const = default;
};

// Compiles `spec` into a Grammar; throws GrammarError (JSON that does not parse included).
Grammar compile_spec(const GrammarSpec& spec);

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary);
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocabulary() const { return masker_.vocabulary(); }

 private:
  friend class GrammarMatcher;
  Grammar grammar_;
  StackForest forest_;
  TokenMasker masker_;
  std::mutex mutex_;
};

// Copyable: a copy is an independent position in the same grammar (jump-forward's probes).
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

  // Consumes a token the mask allowed; false (state unchanged) if the grammar refuses it.
  bool accept_token(int id);
  // Consumes raw bytes (tests, jump-forward); false (state unchanged) if refused.
  bool accept_bytes(std::string_view bytes);
  // The text so far is a complete match: a stop token may end it here.
  bool can_finish() const;
  // Nothing but stopping is possible (the match cannot grow).
  bool must_finish() const;
  // Fills the allowed-token bitmask (bit t % 32 of words[t / 32]); stop tokens not included.
  void fill_mask(std::span<uint32_t> words);
  // The bytes the grammar forces from here (a unique continuation; up to `max_bytes`), ending
  // where it allows two bytes or may end: jump-forward appends them without drawing.
  std::string forced_bytes(size_t max_bytes);
  const NodeSet& state() const { return state_; }
  const TokenVocabulary& vocabulary() const { return grammar_->vocabulary(); }
  int vocabulary_size() const { return grammar_->vocabulary().size(); }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  NodeSet state_;
};

}  // namespace strata::grammar
