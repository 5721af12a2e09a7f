// Token masks on a real vocabulary (qwen3's, 151k tokens): the cached masks against a brute
// force check of every token, and random constrained decoding (uniform draws among the allowed
// tokens, the worst case for termination) of a suite of schemas, regexes and an EBNF grammar:
// every output parses and validates, a token is always allowed until the grammar accepts, and
// a stop token only then.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_suite.h"
#include "tokenizer_fixtures.h"

namespace strata::grammar {
namespace {

std::shared_ptr<const TokenVocabulary> qwen3_vocabulary() {
  static const auto vocab = TokenVocabulary::from_tokenizer(test::fixture_tokenizer("qwen3"));
  return vocab;
}

bool allowed(const std::vector<uint32_t>& words, int id) {
  return words[id >> 5] >> (id & 31) & 1;
}

TEST(TokenMask, VocabularyFromTokenizerHoldsRawBytes) {
  const tok::Tokenizer& t = test::fixture_tokenizer("qwen3");
  const auto vocab = qwen3_vocabulary();
  const std::vector<int> ids = t.encode(" hello\n{\"é\"}");
  std::string joined;
  for (int id : ids) joined += vocab->bytes(id);
  EXPECT_EQ(joined, " hello\n{\"é\"}");
  // Special tokens are never emitted through a grammar.
  EXPECT_FALSE(vocab->usable(*t.token_to_id("<|im_end|>")));
}

TEST(TokenMask, CachedMasksEqualBruteForce) {
  const auto vocab = qwen3_vocabulary();
  auto g = std::make_shared<CompiledGrammar>(
      compile_spec({GrammarSpec::Kind::JsonSchema, suite::schemas()[0].schema}), vocab);
  const std::vector<std::string> prefixes = {"", "{", "{\"name\":\"", "{\"name\":\"ab",
                                             "{\"name\":\"ab\",\"age\":1"};
  std::vector<uint32_t> words((vocab->size() + 31) / 32);
  for (const std::string& prefix : prefixes) {
    SCOPED_TRACE(prefix);
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes(prefix));
    for (int pass = 0; pass < 2; ++pass) {  // computed, then from the state cache
      m.fill_mask(words);
      int count = 0;
      for (int id = 0; id < vocab->size(); ++id) {
        GrammarMatcher probe = m;
        const bool expected = vocab->usable(id) && probe.accept_token(id);
        ASSERT_EQ(allowed(words, id), expected)
            << "token " << id << " '" << vocab->bytes(id) << "'";
        count += expected;
      }
      EXPECT_GT(count, 0);
    }
  }
}

// Pcre2 full match, for the regex outputs.
bool pcre2_full_match(const std::string& pattern, const std::string& s) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                   &error, &offset, nullptr);
  if (!code) return false;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  const bool ok =
      pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data, nullptr) >= 0;
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return ok;
}

// Decodes with uniform random choices among the allowed tokens plus a stop token (id -1 here)
// when the grammar accepts; checks the never-dead-end property at every step.
std::string random_decode(const std::shared_ptr<CompiledGrammar>& g, std::mt19937& rng,
                          int max_tokens, bool& finished) {
  const TokenVocabulary& vocab = g->vocabulary();
  GrammarMatcher m(g);
  std::vector<uint32_t> words((vocab.size() + 31) / 32);
  std::vector<int> choices;
  std::string out;
  finished = false;
  for (int step = 0; step < max_tokens; ++step) {
    m.fill_mask(words);
    choices.clear();
    for (size_t w = 0; w < words.size(); ++w)
      for (uint32_t bits = words[w]; bits; bits &= bits - 1)
        choices.push_back(static_cast<int>(w * 32 + __builtin_ctz(bits)));
    // Never a dead end: some token, or the stop token, is always allowed.
    EXPECT_TRUE(!choices.empty() || m.can_finish()) << "dead end after '" << out << "'";
    if (m.must_finish()) {
      EXPECT_TRUE(choices.empty()) << out;
    }
    if (m.can_finish()) choices.push_back(-1);
    if (choices.empty()) return out;
    const int pick = choices[rng() % choices.size()];
    if (pick < 0) {
      finished = true;
      return out;
    }
    EXPECT_TRUE(m.accept_token(pick));
    out += vocab.bytes(pick);
  }
  return out;
}

int seeds_per_case() {
  return std::getenv("STRATA_HEAVY_TESTS") ? 100 : 20;
}

TEST(TokenMask, SchemaSuiteOutputsValidate) {
  const auto vocab = qwen3_vocabulary();
  for (const suite::SchemaCase& c : suite::schemas()) {
    SCOPED_TRACE(c.name);
    auto g = std::make_shared<CompiledGrammar>(
        compile_spec({GrammarSpec::Kind::JsonSchema, c.schema}), vocab);
    const auto schema = nlohmann::json::parse(c.schema);
    int done = 0;
    for (int seed = 0; seed < seeds_per_case(); ++seed) {
      std::mt19937 rng(seed);
      bool finished = false;
      const std::string out = random_decode(g, rng, 400, finished);
      if (!finished) continue;  // ran out of tokens: counted below
      ++done;
      ASSERT_TRUE(nlohmann::json::accept(out)) << out;
      const std::string problem = suite::validate(nlohmann::json::parse(out), schema, schema);
      EXPECT_EQ(problem, "") << out;
    }
    EXPECT_EQ(done, seeds_per_case()) << "outputs that did not finish within 400 tokens";
  }
}

TEST(TokenMask, RegexAndEbnfOutputsMatch) {
  const auto vocab = qwen3_vocabulary();
  const std::vector<std::string> regexes = {"[0-9]{3}-[0-9]{4}", "(yes|no|maybe)!?",
                                            "[a-z]{1,8}@[a-z]{1,8}\\.(com|org)",
                                            "-?(0|[1-9][0-9]{0,5})(\\.[0-9]{1,3})?"};
  for (const std::string& pattern : regexes) {
    SCOPED_TRACE(pattern);
    auto g =
        std::make_shared<CompiledGrammar>(compile_spec({GrammarSpec::Kind::Regex, pattern}), vocab);
    for (int seed = 0; seed < seeds_per_case(); ++seed) {
      std::mt19937 rng(seed);
      bool finished = false;
      const std::string out = random_decode(g, rng, 64, finished);
      ASSERT_TRUE(finished) << out;
      EXPECT_TRUE(pcre2_full_match(pattern, out)) << out;
    }
  }
  // Arithmetic with bounded numbers and depth; outputs checked by nlohmann's parser after
  // mapping to a JSON array form would be circular, so by PCRE2's recursive pattern instead.
  const std::string ebnf = R"EBNF(
    root ::= expr
    expr ::= term ([+-] term){0,3}
    term ::= [0-9]{1,3} | "(" expr ")"
  )EBNF";
  const std::string reference = "((?:[0-9]{1,3}|\\((?1)\\))(?:[+-](?:[0-9]{1,3}|\\((?1)\\))){0,3})";
  auto g = std::make_shared<CompiledGrammar>(compile_spec({GrammarSpec::Kind::Ebnf, ebnf}), vocab);
  int finished_count = 0;
  for (int seed = 0; seed < seeds_per_case(); ++seed) {
    std::mt19937 rng(seed);
    bool finished = false;
    const std::string out = random_decode(g, rng, 200, finished);
    if (!finished) continue;
    ++finished_count;
    EXPECT_TRUE(pcre2_full_match(reference, out)) << out;
  }
  EXPECT_GE(finished_count, seeds_per_case() * 3 / 4);
}

}  // namespace
}  // namespace strata::grammar
