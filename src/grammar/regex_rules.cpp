#include "grammar/regex_rules.h"

#include <fmt/format.h>

#include "grammar/utf8_ranges.h"

namespace strata::grammar {

namespace {

using Sequence = std::vector<Element>;

// Repetition bounds beyond this are refused: each copy is a grammar element.
constexpr int kMaxRepeat = 1000;

class RegexCompiler {
 public:
  RegexCompiler(GrammarBuilder& b, std::string_view p, const RegexOptions& o)
      : b_(b), p_(p), opt_(o) {}

  uint32_t compile() {
    if (!p_.empty() && p_.front() == '^') ++i_;
    Sequence seq = alternation();
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "an unmatched ')'" : "an unexpected character");
    const uint32_t rule = b_.fresh_rule("regex");
    b_.add_alternative(rule, seq);
    return rule;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError(
        fmt::format("regex '{}' has {} at offset {}; supported: literals, ., "
                    "[classes], \\d \\w \\s, groups, |, * + ? {{n,m}}",
                    p_, what, i_));
  }

  bool at_end() const { return i_ >= p_.size(); }

  Sequence alternation() {
    std::vector<Sequence> branches{concatenation()};
    while (!at_end() && p_[i_] == '|') {
      ++i_;
      branches.push_back(concatenation());
    }
    if (branches.size() == 1) return branches[0];
    const uint32_t rule = b_.fresh_rule("alt");
    for (const Sequence& s : branches) b_.add_alternative(rule, s);
    return {GrammarBuilder::ref(rule)};
  }

  Sequence concatenation() {
    Sequence out;
    while (!at_end() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && i_ + 1 == p_.size()) {
        ++i_;
        break;
      }
      Sequence a = atom();
      a = quantified(std::move(a));
      out.insert(out.end(), a.begin(), a.end());
    }
    return out;
  }

  // One element standing for `s` (a rule when s is not already a single element).
  Element single(const Sequence& s) {
    if (s.size() == 1) return s[0];
    const uint32_t rule = b_.fresh_rule("group");
    b_.add_alternative(rule, s);
    return GrammarBuilder::ref(rule);
  }

  bool read_int(int& value) {
    size_t start = i_;
    value = 0;
    while (!at_end() && p_[i_] >= '0' && p_[i_] <= '9') {
      value = value * 10 + (p_[i_] - '0');
      if (value > 1000000) fail("a repetition count too large");
      ++i_;
    }
    return i_ > start;
  }

  Sequence quantified(Sequence a) {
    if (at_end()) return a;
    int lo = 0, hi = -1;  // hi -1: unbounded
    const char c = p_[i_];
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      lo = 1, ++i_;
    } else if (c == '?') {
      hi = 1, ++i_;
    } else if (c == '{') {
      const size_t save = i_++;
      if (!read_int(lo)) {  // a literal '{'
        i_ = save;
        return a;
      }
      hi = lo;
      if (!at_end() && p_[i_] == ',') {
        ++i_;
        if (!read_int(hi)) hi = -1;
      }
      if (at_end() || p_[i_] != '}') {
        i_ = save;
        return a;
      }
      ++i_;
      if (hi >= 0 && hi < lo) fail(fmt::format("a repetition {{{},{}}} with max < min", lo, hi));
    } else {
      return a;
    }
    if (!at_end() && (p_[i_] == '?' || p_[i_] == '+')) ++i_;  // lazy/possessive: same strings
    if (lo > kMaxRepeat || hi > kMaxRepeat)
      fail(fmt::format("a repetition bound above {}", kMaxRepeat));
    return repeat(single(a), lo, hi);
  }

 public:
  // e{lo,hi}: lo copies, then either e* (hi unbounded) or a chain of hi-lo optional copies.
  static Sequence repeat(GrammarBuilder& b, Element e, int lo, int hi) {
    Sequence out(static_cast<size_t>(lo), e);
    if (hi < 0) {
      const uint32_t star = b.fresh_rule("star");
      b.add_alternative(star, {e, GrammarBuilder::ref(star)});
      b.add_alternative(star, {});
      out.push_back(GrammarBuilder::ref(star));
    } else if (hi > lo) {
      uint32_t tail = b.fresh_rule("opt");
      b.add_alternative(tail, {e});
      b.add_alternative(tail, {});
      for (int k = lo + 1; k < hi; ++k) {
        const uint32_t outer = b.fresh_rule("opt");
        b.add_alternative(outer, {e, GrammarBuilder::ref(tail)});
        b.add_alternative(outer, {});
        tail = outer;
      }
      out.push_back(GrammarBuilder::ref(tail));
    }
    return out;
  }

 private:
  Sequence repeat(Element e, int lo, int hi) { return repeat(b_, e, lo, hi); }

  uint32_t read_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) fail("a bad hex escape");
      const char h = p_[i_++];
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  uint32_t read_code_point() {
    const auto lead = static_cast<unsigned char>(p_[i_]);
    const int len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    if (i_ + len > p_.size()) fail("truncated UTF-8");
    uint32_t cp = len == 1 ? lead : lead & (0x3F >> (len - 1));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + k]) & 0x3F);
    i_ += len;
    return cp;
  }

  static CodePointRanges class_escape(char c) {
    switch (c) {
      case 'd':
        return {{'0', '9'}};
      case 'w':
        return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      case 's':
        return {{'\t', '\r'}, {' ', ' '}};
      case 'D':
        return complement_ranges(class_escape('d'));
      case 'W':
        return complement_ranges(class_escape('w'));
      case 'S':
        return complement_ranges(class_escape('s'));
    }
    return {};
  }

  // After a backslash: the code points the escape stands for.
  CodePointRanges escape() {
    if (at_end()) fail("a trailing backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'd':
      case 'w':
      case 's':
      case 'D':
      case 'W':
      case 'S':
        return class_escape(c);
      case 'n':
        return {{'\n', '\n'}};
      case 't':
        return {{'\t', '\t'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'x': {
        const uint32_t v = read_hex(2);
        return {{v, v}};
      }
      case 'u': {
        uint32_t v;
        if (!at_end() && p_[i_] == '{') {
          ++i_;
          v = 0;
          while (!at_end() && p_[i_] != '}') v = v * 16 + read_hex(1);
          if (at_end()) fail("an unterminated \\u{...}");
          ++i_;
        } else {
          v = read_hex(4);
        }
        return {{v, v}};
      }
      case 'b':
      case 'B':
        --i_;
        fail("a word boundary (\\b), which is not supported");
      default:
        if (c >= '1' && c <= '9') {
          --i_;
          fail("a backreference, which is not supported");
        }
        if (std::isalnum(static_cast<unsigned char>(c))) {
          --i_;
          fail(fmt::format("an unknown escape \\{}", c));
        }
        return {{static_cast<uint8_t>(c), static_cast<uint8_t>(c)}};
    }
  }

  CodePointRanges bracket_class() {
    ++i_;  // '['
    bool negate = false;
    if (!at_end() && p_[i_] == '^') negate = true, ++i_;
    CodePointRanges ranges;
    bool first = true;
    while (true) {
      if (at_end()) fail("an unterminated [class]");
      if (p_[i_] == ']' && !first) break;
      first = false;
      CodePointRanges item;
      if (p_[i_] == '\\') {
        ++i_;
        item = escape();
      } else {
        const uint32_t cp = read_code_point();
        item = {{cp, cp}};
      }
      // A range a-b (only between single characters; a trailing '-' is literal).
      if (item.size() == 1 && item[0].first == item[0].second && i_ + 1 < p_.size() &&
          p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (p_[i_] == '\\') {
          ++i_;
          CodePointRanges h = escape();
          if (h.size() != 1 || h[0].first != h[0].second) fail("a class escape as a range end");
          hi = h[0].first;
        } else {
          hi = read_code_point();
        }
        if (hi < item[0].first) fail("a reversed range in a [class]");
        item[0].second = hi;
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    ++i_;  // ']'
    return negate ? complement_ranges(ranges) : normalize_ranges(ranges);
  }

  Sequence char_class(CodePointRanges ranges) {
    if (opt_.json_string) ranges = subtract_ranges(ranges, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    ranges = normalize_ranges(ranges);
    if (ranges.empty()) fail("a character class that matches nothing");
    const std::vector<Utf8Sequence> seqs = utf8_sequences(ranges);
    ByteSet single;
    std::vector<Sequence> multi;
    for (const Utf8Sequence& s : seqs) {
      if (s.size() == 1) {
        single.set_range(s[0].lo, s[0].hi);
        continue;
      }
      Sequence seq;
      for (ByteRange r : s) {
        ByteSet bs;
        bs.set_range(r.lo, r.hi);
        seq.push_back(b_.bytes(bs));
      }
      multi.push_back(seq);
    }
    if (multi.empty()) return {b_.bytes(single)};
    const uint32_t rule = b_.fresh_rule("class");
    if (!single.empty()) b_.add_alternative(rule, {b_.bytes(single)});
    for (const Sequence& s : multi) b_.add_alternative(rule, s);
    return {GrammarBuilder::ref(rule)};
  }

  Sequence atom() {
    const char c = p_[i_];
    switch (c) {
      case '(': {
        ++i_;
        if (p_.substr(i_, 2) == "?:") {
          i_ += 2;
        } else if (p_.substr(i_, 2) == "?<" && p_.substr(i_, 3) != "?<=" &&
                   p_.substr(i_, 3) != "?<!") {
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) fail("an unterminated group name");
          i_ = close + 1;
        } else if (!at_end() && p_[i_] == '?') {
          fail("a lookaround or inline flag group '(?', which is not supported");
        }
        Sequence inner = alternation();
        if (at_end() || p_[i_] != ')') fail("an unterminated group");
        ++i_;
        return inner;
      }
      case '[':
        return char_class(bracket_class());
      case '.':
        ++i_;
        return char_class(complement_ranges({{'\n', '\n'}}));
      case '\\':
        ++i_;
        return char_class(escape());
      case '*':
      case '+':
      case '?':
        fail("a quantifier with nothing to repeat");
      case '^':
        fail("a '^' anchor that is not at the start");
      case '$':
        fail("a '$' anchor that is not at the end");
      default: {
        const uint32_t cp = read_code_point();
        return char_class({{cp, cp}});
      }
    }
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexOptions opt_;
  size_t i_ = 0;
};

}  // namespace

uint32_t compile_regex(GrammarBuilder& builder, std::string_view pattern,
                       const RegexOptions& options) {
  return RegexCompiler(builder, pattern, options).compile();
}

Sequence repeat_element(GrammarBuilder& builder, Element e, int lo, int hi) {
  return RegexCompiler::repeat(builder, e, lo, hi);
}

}  // namespace strata::grammar
