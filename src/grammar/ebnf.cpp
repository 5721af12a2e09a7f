#include "grammar/ebnf.h"

#include <fmt/format.h>

#include <cctype>

#include "grammar/regex_rules.h"
#include "grammar/utf8_ranges.h"
#include "tokenizer/unicode.h"

namespace strata::grammar {

namespace {

using Sequence = std::vector<Element>;

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

class EbnfParser {
 public:
  EbnfParser(GrammarBuilder& b, std::string_view t) : b_(b), t_(t) {}

  void parse_rules() {
    skip_space();
    while (!at_end()) {
      const std::string name = read_name();
      if (name.empty()) fail("a rule name");
      skip_space();
      if (t_.substr(i_, 3) != "::=") fail(fmt::format("'::=' after rule name '{}'", name));
      i_ += 3;
      const uint32_t rule = b_.declare(name);
      if (defined_.size() <= rule) defined_.resize(rule + 1, false);
      if (defined_[rule])
        fail(fmt::format("one definition of rule '{}' (it is defined twice)", name));
      defined_[rule] = true;
      for (const Sequence& alt : alternatives()) b_.add_alternative(rule, alt);
      skip_space();
    }
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const {
    size_t line = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    throw GrammarError(fmt::format("EBNF grammar, line {}: expected {}", line, expected));
  }

  bool at_end() const { return i_ >= t_.size(); }

  void skip_space() {
    while (!at_end()) {
      if (std::isspace(static_cast<unsigned char>(t_[i_]))) {
        ++i_;
      } else if (t_[i_] == '#') {
        while (!at_end() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t start = i_;
    while (!at_end() && is_name_char(t_[i_])) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  // True when the text at the cursor begins the next rule (`name ::=`).
  bool at_rule_start() const {
    size_t k = i_;
    while (k < t_.size() && is_name_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  std::vector<Sequence> alternatives() {
    std::vector<Sequence> alts{sequence()};
    while (!at_end() && t_[i_] == '|') {
      ++i_;
      alts.push_back(sequence());
    }
    return alts;
  }

  Sequence sequence() {
    Sequence out;
    while (true) {
      skip_space();
      if (at_end() || t_[i_] == '|' || t_[i_] == ')' || at_rule_start()) return out;
      Sequence item = primary();
      skip_space();
      item = postfix(std::move(item));
      out.insert(out.end(), item.begin(), item.end());
    }
  }

  Element single(const Sequence& s) {
    if (s.size() == 1) return s[0];
    const uint32_t rule = b_.fresh_rule("group");
    b_.add_alternative(rule, s);
    return GrammarBuilder::ref(rule);
  }

  int read_int() {
    if (at_end() || !std::isdigit(static_cast<unsigned char>(t_[i_]))) fail("a repetition count");
    int v = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
      v = v * 10 + (t_[i_++] - '0');
      if (v > 1000) fail("a repetition count of at most 1000");
    }
    return v;
  }

  Sequence postfix(Sequence item) {
    while (!at_end()) {
      int lo, hi;
      const char c = t_[i_];
      if (c == '*') {
        lo = 0, hi = -1;
      } else if (c == '+') {
        lo = 1, hi = -1;
      } else if (c == '?') {
        lo = 0, hi = 1;
      } else if (c == '{') {
        ++i_;
        skip_space();
        lo = hi = read_int();
        skip_space();
        if (!at_end() && t_[i_] == ',') {
          ++i_;
          skip_space();
          hi = !at_end() && t_[i_] == '}' ? -1 : read_int();
          skip_space();
        }
        if (at_end() || t_[i_] != '}') fail("'}' closing a repetition");
        if (hi >= 0 && hi < lo) fail(fmt::format("a repetition {{{},{}}} with max >= min", lo, hi));
      } else {
        return item;
      }
      ++i_;
      item = repeat_element(b_, single(item), lo, hi);
      skip_space();
    }
    return item;
  }

  uint32_t read_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(t_[i_]))) fail("a hex digit");
      const char h = t_[i_++];
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  // One character of a string or class: an escape or a UTF-8 code point.
  uint32_t read_char() {
    if (at_end()) fail("a character");
    if (t_[i_] == '\\') {
      ++i_;
      if (at_end()) fail("an escape after '\\'");
      const char c = t_[i_++];
      switch (c) {
        case 'n':
          return '\n';
        case 't':
          return '\t';
        case 'r':
          return '\r';
        case 'x':
          return read_hex(2);
        case 'u':
          return read_hex(4);
        case 'U':
          return read_hex(8);
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<uint8_t>(c);
        default:
          --i_;
          fail(fmt::format("a known escape (\\n \\t \\r \\xHH \\uHHHH ...), not \\{}", c));
      }
    }
    const auto lead = static_cast<unsigned char>(t_[i_]);
    const int len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    if (i_ + len > t_.size()) fail("complete UTF-8");
    uint32_t cp = len == 1 ? lead : lead & (0x3F >> (len - 1));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(t_[i_ + k]) & 0x3F);
    i_ += len;
    return cp;
  }

  Sequence char_class(const CodePointRanges& ranges) {
    // Through the regex compiler's class handling: one code path for UTF-8 classes.
    std::string pattern = "[";
    for (auto [lo, hi] : normalize_ranges(ranges)) {
      pattern += fmt::format("\\u{{{:X}}}", lo);
      if (hi > lo) pattern += fmt::format("-\\u{{{:X}}}", hi);
    }
    pattern += "]";
    return {GrammarBuilder::ref(compile_regex(b_, pattern))};
  }

  Sequence primary() {
    const char c = t_[i_];
    if (c == '"' || c == '\'') {
      ++i_;
      std::string bytes;
      while (true) {
        if (at_end()) fail(fmt::format("{} closing a string", c));
        if (t_[i_] == c) break;
        tok::utf8_append(bytes, static_cast<char32_t>(read_char()));
      }
      ++i_;
      Sequence out;
      b_.append_literal(out, bytes);
      return out;
    }
    if (c == '[') {
      ++i_;
      bool negate = false;
      if (!at_end() && t_[i_] == '^') negate = true, ++i_;
      CodePointRanges ranges;
      while (true) {
        if (at_end()) fail("']' closing a character class");
        if (t_[i_] == ']') break;
        const uint32_t lo = read_char();
        uint32_t hi = lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          hi = read_char();
          if (hi < lo) fail("a range low-high with low <= high");
        }
        ranges.push_back({lo, hi});
      }
      ++i_;
      if (negate) ranges = complement_ranges(ranges);
      if (normalize_ranges(ranges).empty()) fail("a character class that matches something");
      return char_class(ranges);
    }
    if (c == '.') {
      ++i_;
      return char_class({{0, kMaxCodePoint}});
    }
    if (c == '/') {
      ++i_;
      std::string pattern;
      while (true) {
        if (at_end()) fail("'/' closing a regex");
        if (t_[i_] == '/') break;
        if (t_[i_] == '\\' && i_ + 1 < t_.size() && t_[i_ + 1] == '/')
          ++i_;  // \/ is a '/'
        else if (t_[i_] == '\\' && i_ + 1 < t_.size())
          pattern += t_[i_++];
        pattern += t_[i_++];
      }
      ++i_;
      return {GrammarBuilder::ref(compile_regex(b_, pattern))};
    }
    if (c == '(') {
      ++i_;
      const std::vector<Sequence> alts = alternatives();
      skip_space();
      if (at_end() || t_[i_] != ')') fail("')' closing a group");
      ++i_;
      if (alts.size() == 1) return alts[0];
      const uint32_t rule = b_.fresh_rule("group");
      for (const Sequence& a : alts) b_.add_alternative(rule, a);
      return {GrammarBuilder::ref(rule)};
    }
    const std::string name = read_name();
    if (name.empty())
      fail(fmt::format("a string, [class], /regex/, (group) or rule name, not '{}'", c));
    return {GrammarBuilder::ref(b_.declare(name))};
  }

  GrammarBuilder& b_;
  std::string_view t_;
  size_t i_ = 0;
  std::vector<bool> defined_;
};

}  // namespace

void add_ebnf_rules(GrammarBuilder& builder, std::string_view text) {
  EbnfParser(builder, text).parse_rules();
}

Grammar compile_ebnf(std::string_view text, std::string_view root) {
  GrammarBuilder builder;
  add_ebnf_rules(builder, text);
  if (!builder.is_declared(std::string(root)))
    throw GrammarError(fmt::format("EBNF grammar has no '{}' rule (the start rule)", root));
  return std::move(builder).finish(builder.declare(std::string(root)));
}

}  // namespace strata::grammar
