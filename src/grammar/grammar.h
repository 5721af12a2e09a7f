#pragma once
// The one grammar form every constraint compiles to: a context-free grammar over bytes, run as
// a pushdown automaton (grammar/stack_forest.h). Regexes, JSON schemas and EBNF all become
// rules of this form, so that one matcher and one token-mask cache serve all three.
//
// A rule is a list of alternatives; an alternative is a run of elements in `elements`, ended
// by an End element. An element matches one byte out of a set (ByteSet) or a whole rule (Ref).
// Rule 0 is the root. Left recursion is rejected when the grammar is built (the automaton
// expands references eagerly and would never stop), as is a rule that matches no finite string
// (a stack holding it could never finish: the "never dead-ends" guarantee rests on this).
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::grammar {

// A grammar that cannot be compiled; the message names the construct and what is allowed.
class GrammarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// 256 bits: which byte values an element accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool empty() const { return !(bits[0] | bits[1] | bits[2] | bits[3]); }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum class Kind : uint8_t { Bytes, Ref, End };
  Kind kind = Kind::End;
  uint32_t value = 0;  // Bytes: index into byte_sets; Ref: the rule id
};

struct Rule {
  std::string name;
  std::vector<uint32_t> alternatives;  // start offsets into Grammar::elements
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<Rule> rules;
  std::vector<ByteSet> byte_sets;

  const ByteSet& bytes_of(uint32_t pos) const { return byte_sets[elements[pos].value]; }
  // For tests and error messages: the grammar written back as EBNF.
  std::string to_ebnf() const;
};

// Builds a Grammar rule by rule. A rule may be referenced before it is defined (declare it);
// finish() checks that every referenced rule has alternatives, then the two rules above.
class GrammarBuilder {
 public:
  // Creates the rule (or returns the existing one of that name).
  uint32_t declare(const std::string& name);
  // A rule with a fresh name derived from `hint` (for regex groups, repetitions, ...).
  uint32_t fresh_rule(const std::string& hint);
  bool is_declared(const std::string& name) const;
  void add_alternative(uint32_t rule, const std::vector<Element>& sequence);
  Element bytes(const ByteSet& set);
  Element byte(uint8_t b);
  static Element ref(uint32_t rule) { return {Element::Kind::Ref, rule}; }
  // Appends one element per byte of `text`.
  void append_literal(std::vector<Element>& out, const std::string& text);
  size_t rule_count() const { return grammar_.rules.size(); }
  const std::string& rule_name(uint32_t rule) const { return grammar_.rules[rule].name; }

  // The grammar rooted at `root`, which becomes rule 0.
  Grammar finish(uint32_t root) &&;

 private:
  Grammar grammar_;
  std::vector<std::vector<std::vector<Element>>> pending_;  // per rule: its alternatives
};

}  // namespace strata::grammar
