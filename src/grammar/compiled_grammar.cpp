#include "grammar/compiled_grammar.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex_rules.h"

namespace strata::grammar {

Grammar compile_spec(const GrammarSpec& spec) {
  switch (spec.kind) {
    case GrammarSpec::Kind::Regex: {
      GrammarBuilder builder;
      const uint32_t rule = compile_regex(builder, spec.text);
      return std::move(builder).finish(rule);
    }
    case GrammarSpec::Kind::Ebnf:
      return compile_ebnf(spec.text);
    case GrammarSpec::Kind::JsonObject:
      return json_object_grammar();
    case GrammarSpec::Kind::JsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(spec.text);
      } catch (const nlohmann::json::exception& e) {
        throw GrammarError(fmt::format("json_schema is not valid JSON: {}", e.what()));
      }
      return compile_json_schema(schema);
    }
  }
  throw GrammarError("unknown grammar kind");
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : grammar_(std::move(grammar)), forest_(grammar_), masker_(forest_, std::move(vocabulary)) {}

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->forest_.initial()) {}

bool GrammarMatcher::accept_token(int id) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  if (id < 0 || id >= vocab.size() || !vocab.usable(id)) return false;
  return accept_bytes(vocab.bytes(id));
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  std::lock_guard lock(grammar_->mutex_);
  NodeSet next;
  if (!grammar_->masker_.advance_bytes(state_, bytes, next)) return false;
  state_ = std::move(next);
  return true;
}

bool GrammarMatcher::can_finish() const {
  return !state_.empty() && state_.front() == StackForest::kAccept;
}

bool GrammarMatcher::must_finish() const {
  return state_.size() == 1 && can_finish();
}

std::string GrammarMatcher::forced_bytes(size_t max_bytes) {
  std::lock_guard lock(grammar_->mutex_);  // advancing fills the forest's memo tables
  StackForest& forest = grammar_->forest_;
  std::string forced;
  NodeSet at = state_, next, only;
  while (forced.size() < max_bytes && !at.empty() && at.front() != StackForest::kAccept) {
    int byte = -1;
    for (int b = 0; b < 256; ++b) {
      forest.advance_set(at, static_cast<uint8_t>(b), next);
      if (next.empty()) continue;
      if (byte >= 0) return forced;  // a second byte: a choice, the forced run ends
      byte = b;
      only.swap(next);
    }
    if (byte < 0) break;  // a dead end (the masks never lead here)
    forced.push_back(static_cast<char>(byte));
    at.swap(only);
  }
  return forced;
}

void GrammarMatcher::fill_mask(std::span<uint32_t> words) {
  std::lock_guard lock(grammar_->mutex_);
  grammar_->masker_.fill_mask(state_, words);
}

}  // namespace strata::grammar
