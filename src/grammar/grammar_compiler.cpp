#include "grammar/grammar_compiler.h"

namespace strata::grammar {

std::shared_ptr<CompiledGrammar> GrammarCompiler::compile(const GrammarSpec& spec) {
  const std::pair<int, std::string> key{static_cast<int>(spec.kind), spec.text};
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  // Compiled outside the lock: a large schema must not stall other requests.
  auto compiled = std::make_shared<CompiledGrammar>(compile_spec(spec), vocabulary_);
  std::lock_guard lock(mutex_);
  if (cache_.size() >= kCapacity) cache_.clear();
  return cache_.emplace(key, std::move(compiled)).first->second;
}

size_t GrammarCompiler::cached() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

}  // namespace strata::grammar
