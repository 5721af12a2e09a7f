// The grammar engine against independent references on random strings: PCRE2 for regexes
// (anchored at both ends), nlohmann::json's parser for the JSON grammar, a hand-written
// recursive-descent checker for an EBNF grammar; plus the compile-time refusals.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/ebnf.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/regex_rules.h"

namespace strata::grammar {
namespace {

using test::compile_for_bytes;
using test::full_match;

class Pcre2FullMatch {
 public:
  explicit Pcre2FullMatch(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_NO_UTF_CHECK,
        &error, &offset, nullptr);
    EXPECT_NE(code_, nullptr) << pattern;
    data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Pcre2FullMatch() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  bool operator()(const std::string& s) const {
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data_,
                       nullptr) >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

std::shared_ptr<CompiledGrammar> regex_grammar(const std::string& pattern) {
  GrammarBuilder b;
  const uint32_t rule = compile_regex(b, pattern);
  return compile_for_bytes(std::move(b).finish(rule));
}

// A random walk of the grammar: bytes drawn among those it allows, so that the samples hold
// matches as well as near misses.
std::string random_walk(const std::shared_ptr<CompiledGrammar>& g, std::mt19937& rng, int max_len) {
  GrammarMatcher m(g);
  std::string out;
  std::vector<uint32_t> words(8);
  for (int i = 0; i < max_len; ++i) {
    if (m.can_finish() && rng() % 4 == 0) break;
    m.fill_mask(words);
    std::vector<int> allowed;
    for (int b = 0; b < 256; ++b)
      if (words[b >> 5] >> (b & 31) & 1) allowed.push_back(b);
    if (allowed.empty()) break;
    const char c = static_cast<char>(allowed[rng() % allowed.size()]);
    EXPECT_TRUE(m.accept_bytes(std::string(1, c)));
    out += c;
  }
  return out;
}

// Random strings over `alphabet`, random walks, and walks with one byte changed.
std::vector<std::string> samples(const std::shared_ptr<CompiledGrammar>& g,
                                 const std::vector<std::string>& alphabet, int count,
                                 uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    switch (i % 3) {
      case 0: {
        const int len = static_cast<int>(rng() % 10);
        for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
        break;
      }
      case 1:
        s = random_walk(g, rng, 24);
        break;
      default:
        s = random_walk(g, rng, 24);
        if (!s.empty()) {
          const std::string& a = alphabet[rng() % alphabet.size()];
          s = s.substr(0, rng() % s.size()) + a + s.substr(rng() % s.size());
        }
    }
    out.push_back(s);
  }
  return out;
}

TEST(GrammarEngine, RegexAgreesWithPcre2OnRandomStrings) {
  const std::vector<std::string> patterns = {
      "abc",
      "a|b|cd",
      "(ab)*c+d?",
      "[a-c]{2,4}x{0,2}",
      "\\d{3}-\\d{4}",
      "[^a-c]+",
      "(foo|foobar|fo)(bar)?",
      "\\w+@\\w+\\.(com|org)",
      "[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?",
      "(a|ab)(c|bcd)(d*)",
      "x(y(z|w)*)+",
      ".{1,3}",
      "[α-ω]+é?",
      "(?:\\s|,)*[\\u00e0-\\u00ff]{1,2}",
      "((a{2})|b){1,3}",
      "[\\w.-]+",
  };
  const std::vector<std::string> alphabet = {"a", "b", "c", "d",   "x",   "y",    "z",   "w", "0",
                                             "5", "9", "-", ".",   "@",   "e",    "E",   "+", " ",
                                             ",", "f", "o", "r",   "_",   "\n",   "α",   "β", "ω",
                                             "é", "à", "ÿ", "com", "org", "\xC3", "\xFF"};
  int checked = 0, matched = 0;
  for (size_t p = 0; p < patterns.size(); ++p) {
    SCOPED_TRACE(patterns[p]);
    const auto g = regex_grammar(patterns[p]);
    const Pcre2FullMatch reference(patterns[p]);
    for (const std::string& s : samples(g, alphabet, 300, static_cast<uint32_t>(p))) {
      const bool expected = reference(s);
      ASSERT_EQ(full_match(g, s), expected) << "string '" << s << "'";
      ++checked;
      matched += expected;
    }
  }
  EXPECT_GE(checked, 4000);
  // Both verdicts are well represented, so agreement means something.
  EXPECT_GT(matched, checked / 5);
  EXPECT_LT(matched, checked * 4 / 5);
}

// An exponent of three or more digits (beyond what a double holds).
bool has_long_exponent(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != 'e' && s[i] != 'E') continue;
    size_t k = i + 1;
    if (k < s.size() && (s[k] == '-' || s[k] == '+')) ++k;
    size_t digits = 0;
    while (k + digits < s.size() && std::isdigit(static_cast<unsigned char>(s[k + digits])))
      ++digits;
    if (digits >= 3) return true;
  }
  return false;
}

TEST(GrammarEngine, JsonGrammarAgreesWithJsonParserOnRandomStrings) {
  const auto g = compile_for_bytes(json_object_grammar());
  const std::vector<std::string> alphabet = {"{",   "}",       "[",    "]",    "\"", ":",   ",",
                                             "1",   "0",       "-",    ".",    "e",  "a",   "\\",
                                             "\\n", "\\u00e9", "true", "null", "é",  "\x01"};
  int checked = 0, valid = 0;
  for (const std::string& s : samples(g, alphabet, 3000, 7)) {
    // The grammar emits compact JSON: the parser is the reference on whitespace-free text.
    if (s.find_first_of(" \t\n\r") != std::string::npos) continue;
    // Nor does the parser accept numbers beyond double range, which JSON's syntax allows.
    if (has_long_exponent(s)) continue;
    bool expected = nlohmann::json::accept(s) && nlohmann::json::parse(s).is_object();
    ASSERT_EQ(full_match(g, s), expected) << "string '" << s << "'";
    ++checked;
    valid += expected;
  }
  EXPECT_GE(checked, 2500);
  EXPECT_GT(valid, checked / 10);
  EXPECT_LT(valid, checked * 4 / 5);
}

// Reference for the arithmetic grammar below: recursive descent.
struct ArithmeticChecker {
  const std::string& s;
  size_t i = 0;
  bool number() {
    size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > start;
  }
  bool factor() {
    if (i < s.size() && s[i] == '(') {
      ++i;
      if (!expr() || i >= s.size() || s[i] != ')') return false;
      ++i;
      return true;
    }
    if (i < s.size() && s[i] == '-') ++i;
    return number();
  }
  bool term() {
    if (!factor()) return false;
    while (i < s.size() && (s[i] == '*' || s[i] == '/')) {
      ++i;
      if (!factor()) return false;
    }
    return true;
  }
  bool expr() {
    if (!term()) return false;
    while (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      ++i;
      if (!term()) return false;
    }
    return true;
  }
  bool whole() { return expr() && i == s.size(); }
};

constexpr const char* kArithmetic = R"EBNF(
# arithmetic over integers
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor ([*/] factor)*
factor ::= "(" expr ")" | "-"? number
number ::= /[0-9]+/
)EBNF";

TEST(GrammarEngine, EbnfAgreesWithRecursiveDescentOnRandomStrings) {
  const auto g = compile_for_bytes(compile_ebnf(kArithmetic));
  const std::vector<std::string> alphabet = {"(", ")", "+", "-", "*", "/", "1", "23", "0"};
  int checked = 0, valid = 0;
  for (const std::string& s : samples(g, alphabet, 3000, 11)) {
    const bool expected = ArithmeticChecker{s}.whole();
    ASSERT_EQ(full_match(g, s), expected) << "string '" << s << "'";
    ++checked;
    valid += expected;
  }
  EXPECT_GT(valid, checked / 5);
  EXPECT_LT(valid, checked * 4 / 5);
}

TEST(GrammarEngine, EbnfNotation) {
  const auto g = compile_for_bytes(compile_ebnf(R"EBNF(
    root ::= greeting{1,2} tail?   # comment
    greeting ::= 'hi' | "h\u00e9llo" | [x-z]
    tail ::= "\n" . [^a-z0-9]
  )EBNF"));
  EXPECT_TRUE(full_match(g, "hi"));
  EXPECT_TRUE(full_match(g, "héllohi"));
  EXPECT_TRUE(full_match(g, "y\nαZ"));
  EXPECT_FALSE(full_match(g, "hihihi"));
  EXPECT_FALSE(full_match(g, "hi\nαz"));
  EXPECT_FALSE(full_match(g, ""));
}

TEST(GrammarEngine, RefusalsNameTheProblem) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { compile_ebnf("root ::= root \"a\" | \"b\""); }).find("left-recursive"),
            std::string::npos);
  EXPECT_NE(message([] { compile_ebnf("root ::= missing"); }).find("'missing' is used but never"),
            std::string::npos);
  EXPECT_NE(message([] { compile_ebnf("root ::= \"a\" root"); }).find("no finite string"),
            std::string::npos);
  EXPECT_NE(message([] { compile_ebnf("start ::= \"a\""); }).find("no 'root' rule"),
            std::string::npos);
  EXPECT_NE(message([] { regex_grammar("(a)\\1"); }).find("backreference"), std::string::npos);
  EXPECT_NE(message([] { regex_grammar("a(?=b)"); }).find("lookaround"), std::string::npos);
  const std::string schema_error = message([] {
    compile_json_schema(nlohmann::ordered_json::parse(
        R"({"type":"object","properties":{"a":{"type":"integer","minimum":3}}})"));
  });
  EXPECT_NE(schema_error.find("keyword 'minimum' is not supported"), std::string::npos)
      << schema_error;
  EXPECT_NE(schema_error.find("/properties/a"), std::string::npos) << schema_error;
  EXPECT_NE(message([] {
              compile_json_schema(nlohmann::ordered_json::parse(R"({"$ref":"#/$defs/x"})"));
            }).find("names no definition"),
            std::string::npos);
}

TEST(GrammarEngine, SchemaGrammarShapes) {
  const auto g = compile_for_bytes(compile_json_schema(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "id": {"type": "integer"},
      "tag": {"enum": ["a", "b\"q"]},
      "xs": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2},
      "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    },
    "required": ["id", "next"],
    "additionalProperties": false
  })")));
  EXPECT_TRUE(full_match(g, R"({"id":1,"next":null})"));
  EXPECT_TRUE(
      full_match(g, R"({"id":-7,"tag":"b\"q","xs":[1.5,2e3],"next":{"id":0,"next":null}})"));
  EXPECT_TRUE(full_match(g, R"({"id":-7,"tag":"b\"q","next":null})"));
  EXPECT_TRUE(full_match(g, R"({"id":-7,"xs":[1.5,2e3],"next":null})"));
  EXPECT_TRUE(full_match(g, R"({"id":-7,"next":{"id":0,"next":null}})"));
  EXPECT_FALSE(full_match(g, R"({"id":1})"));                           // next is required
  EXPECT_FALSE(full_match(g, R"({"id":1,"xs":[],"next":null})"));       // minItems
  EXPECT_FALSE(full_match(g, R"({"id":1,"xs":[1,2,3],"next":null})"));  // maxItems
  EXPECT_FALSE(full_match(g, R"({"id":01,"next":null})"));
  EXPECT_FALSE(full_match(g, R"({"next":null,"id":1})"));  // schema order
}

TEST(GrammarEngine, CompilerCachesByKindAndText) {
  GrammarCompiler compiler(test::byte_vocabulary());
  const auto a = compiler.compile({GrammarSpec::Kind::Regex, "[ab]+"});
  EXPECT_EQ(compiler.compile({GrammarSpec::Kind::Regex, "[ab]+"}), a);
  EXPECT_NE(compiler.compile({GrammarSpec::Kind::Ebnf, "root ::= [ab]+"}), a);
  EXPECT_EQ(compiler.cached(), 2u);
  EXPECT_THROW(compiler.compile({GrammarSpec::Kind::JsonSchema, "{\"type\": 3"}), GrammarError);
  EXPECT_EQ(compiler.cached(), 2u);  // failures are not cached
}

// Jump-forward's question: the bytes that are the only way on, ending at a choice or where
// the grammar may end.
TEST(GrammarEngine, ForcedBytesEndAtAChoice) {
  GrammarBuilder builder;
  const auto g =
      test::compile_for_bytes(std::move(builder).finish(compile_regex(builder, "abc(de|df)g?")));
  GrammarMatcher m(g);
  EXPECT_EQ(m.forced_bytes(100), "abcd");
  EXPECT_EQ(m.forced_bytes(2), "ab");
  EXPECT_EQ(m.state(), GrammarMatcher(g).state());  // asking moves nothing
  ASSERT_TRUE(m.accept_bytes("abcdf"));
  EXPECT_EQ(m.forced_bytes(100), "");  // "g" or the end
  const auto schema = test::compile_for_bytes(compile_json_schema(nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "n": {"const": 7}},
          "required": ["name", "n"], "additionalProperties": false})")));
  GrammarMatcher j(schema);
  EXPECT_EQ(j.forced_bytes(100), R"({"name":")");
  ASSERT_TRUE(j.accept_bytes(R"({"name":"x)"));
  EXPECT_EQ(j.forced_bytes(100), "");  // more of the string, or its end
  ASSERT_TRUE(j.accept_bytes("\""));
  EXPECT_EQ(j.forced_bytes(100), R"(,"n":7})");
}

}  // namespace
}  // namespace strata::grammar
