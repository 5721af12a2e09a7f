#pragma once
// Compiles request constraints for one vocabulary, caching by (kind, text): requests that send
// the same schema share one CompiledGrammar, and with it every mask already computed. Safe to
// call from any thread (the server's handler threads compile; the engine thread decodes).
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "grammar/compiled_grammar.h"

namespace strata::grammar {

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocabulary)
      : vocabulary_(std::move(vocabulary)) {}

  // Throws GrammarError for a constraint that does not compile.
  std::shared_ptr<CompiledGrammar> compile(const GrammarSpec& spec);
  size_t cached() const;

 private:
  // Bounded (each grammar keeps up to ~8 MB of state masks and its frame masks): when full
  // the cache starts over; requests in flight keep their grammars.
  static constexpr size_t kCapacity = 64;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  mutable std::mutex mutex_;
  std::map<std::pair<int, std::string>, std::shared_ptr<CompiledGrammar>> cache_;
};

}  // namespace strata::grammar
