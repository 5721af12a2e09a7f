#include "grammar/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace strata::grammar {

uint32_t GrammarBuilder::declare(const std::string& name) {
  for (uint32_t r = 0; r < grammar_.rules.size(); ++r)
    if (grammar_.rules[r].name == name) return r;
  grammar_.rules.push_back({name, {}});
  pending_.emplace_back();
  return static_cast<uint32_t>(grammar_.rules.size() - 1);
}

bool GrammarBuilder::is_declared(const std::string& name) const {
  return std::any_of(grammar_.rules.begin(), grammar_.rules.end(),
                     [&](const Rule& r) { return r.name == name; });
}

uint32_t GrammarBuilder::fresh_rule(const std::string& hint) {
  // Generated names hold a character EBNF names cannot, so they never collide with a user's.
  grammar_.rules.push_back({fmt::format("{}#{}", hint, grammar_.rules.size()), {}});
  pending_.emplace_back();
  return static_cast<uint32_t>(grammar_.rules.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, const std::vector<Element>& sequence) {
  pending_[rule].push_back(sequence);
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  // Sets repeat (every JSON string has the same character class): store each once.
  for (uint32_t i = 0; i < grammar_.byte_sets.size(); ++i)
    if (grammar_.byte_sets[i] == set) return {Element::Kind::Bytes, i};
  grammar_.byte_sets.push_back(set);
  return {Element::Kind::Bytes, static_cast<uint32_t>(grammar_.byte_sets.size() - 1)};
}

Element GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

void GrammarBuilder::append_literal(std::vector<Element>& out, const std::string& text) {
  for (char c : text) out.push_back(byte(static_cast<uint8_t>(c)));
}

namespace {

using Alternatives = std::vector<std::vector<std::vector<Element>>>;

// nullable[r]: rule r matches the empty string (a fixpoint over all alternatives).
std::vector<bool> nullable_rules(const Alternatives& alts) {
  std::vector<bool> nullable(alts.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < alts.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& seq : alts[r]) {
        bool all = std::all_of(seq.begin(), seq.end(), [&](const Element& e) {
          return e.kind == Element::Kind::Ref && nullable[e.value];
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// productive[r]: rule r matches some finite string.
std::vector<bool> productive_rules(const Alternatives& alts) {
  std::vector<bool> productive(alts.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < alts.size(); ++r) {
      if (productive[r]) continue;
      for (const auto& seq : alts[r]) {
        bool all = std::all_of(seq.begin(), seq.end(), [&](const Element& e) {
          return e.kind != Element::Kind::Ref || productive[e.value];
        });
        if (all) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  return productive;
}

// Throws if some rule can reach itself without consuming a byte (left recursion).
void reject_left_recursion(const Grammar& g, const Alternatives& alts) {
  const std::vector<bool> nullable = nullable_rules(alts);
  // first[r]: rules that r can start with (reached through nullable prefixes).
  std::vector<std::vector<uint32_t>> first(alts.size());
  for (size_t r = 0; r < alts.size(); ++r)
    for (const auto& seq : alts[r])
      for (const Element& e : seq) {
        if (e.kind != Element::Kind::Ref) break;
        first[r].push_back(e.value);
        if (!nullable[e.value]) break;
      }
  // Depth-first search for a cycle; state 1 = on the current path, 2 = done.
  std::vector<int> state(alts.size(), 0);
  std::vector<uint32_t> path;
  auto visit = [&](auto&& self, uint32_t r) -> void {
    state[r] = 1;
    path.push_back(r);
    for (uint32_t next : first[r]) {
      if (state[next] == 1)
        throw GrammarError(fmt::format(
            "grammar rule '{}' is left-recursive (it can reach itself without matching a "
            "character); rewrite it with repetition, e.g. list ::= item (\",\" item)*",
            g.rules[next].name));
      if (state[next] == 0) self(self, next);
    }
    path.pop_back();
    state[r] = 2;
  };
  for (uint32_t r = 0; r < alts.size(); ++r)
    if (state[r] == 0) visit(visit, r);
}

}  // namespace

Grammar GrammarBuilder::finish(uint32_t root) && {
  Grammar& g = grammar_;
  for (size_t r = 0; r < g.rules.size(); ++r)
    if (pending_[r].empty())
      throw GrammarError(
          fmt::format("grammar rule '{}' is used but never defined", g.rules[r].name));
  // Root becomes rule 0: swap ids everywhere.
  auto remap = [&](uint32_t r) { return r == root ? 0 : r == 0 ? root : r; };
  std::swap(g.rules[0], g.rules[root]);
  std::swap(pending_[0], pending_[root]);
  for (auto& rule_alts : pending_)
    for (auto& seq : rule_alts)
      for (Element& e : seq)
        if (e.kind == Element::Kind::Ref) e.value = remap(e.value);

  const std::vector<bool> productive = productive_rules(pending_);
  for (size_t r = 0; r < g.rules.size(); ++r)
    if (!productive[r])
      throw GrammarError(fmt::format(
          "grammar rule '{}' matches no finite string (every alternative recurses forever)",
          g.rules[r].name));
  reject_left_recursion(g, pending_);

  for (size_t r = 0; r < g.rules.size(); ++r) {
    for (const auto& seq : pending_[r]) {
      g.rules[r].alternatives.push_back(static_cast<uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), seq.begin(), seq.end());
      g.elements.push_back({Element::Kind::End, 0});
    }
  }
  pending_.clear();
  return std::move(g);
}

namespace {

std::string byte_set_to_ebnf(const ByteSet& s) {
  std::string out = "[";
  auto put = [&](int b) {
    if (b >= 0x21 && b < 0x7f && b != ']' && b != '\\' && b != '^' && b != '-')
      out += static_cast<char>(b);
    else
      out += fmt::format("\\x{:02X}", b);
  };
  for (int b = 0; b < 256;) {
    if (!s.test(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.test(static_cast<uint8_t>(e + 1))) ++e;
    put(b);
    if (e > b) {
      out += '-';
      put(e);
    }
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_ebnf() const {
  std::string out;
  for (const Rule& rule : rules) {
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a) out += " |";
      bool empty = true;
      for (uint32_t p = rule.alternatives[a]; elements[p].kind != Element::Kind::End; ++p) {
        empty = false;
        out += ' ';
        out += elements[p].kind == Element::Kind::Ref
                   ? rules[elements[p].value].name
                   : byte_set_to_ebnf(byte_sets[elements[p].value]);
      }
      if (empty) out += " \"\"";
    }
    out += '\n';
  }
  return out;
}

}  // namespace strata::grammar
