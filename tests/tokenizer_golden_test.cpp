// Tokenizers against Hugging Face `tokenizers` (reference.json of each fixture in
// tests/data/tokenizers.tar.xz): ids without and with special tokens, and decoded text; then
// one ~200 KB string mixing every kind of case (long_reference.json, made by
// tests/data/tools/make_long_reference.js), where pieces meet across case boundaries.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"

namespace strata::test {
namespace {

using nlohmann::json;

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, MatchesReference) {
  const tok::Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const json reference = fixture_json(GetParam(), "reference.json");
  ASSERT_GT(reference.at("cases").size(), 100u);
  int failures = 0;
  for (const json& c : reference.at("cases")) {
    const std::string text = c.at("text");
    const auto ids = c.at("ids").get<std::vector<int>>();
    const auto with_special = c.at("ids_with_special").get<std::vector<int>>();
    const std::string decoded = c.at("decoded");
    const auto got = tokenizer.encode(text, false);
    const auto got_special = tokenizer.encode(text, true);
    const std::string got_decoded = tokenizer.decode(ids, false);
    EXPECT_EQ(got, ids) << "text: " << json(text).dump();
    EXPECT_EQ(got_special, with_special) << "text: " << json(text).dump();
    EXPECT_EQ(got_decoded, decoded) << "text: " << json(text).dump();
    failures += got != ids || got_special != with_special || got_decoded != decoded;
    if (failures > 10) FAIL() << "stopping after 10 failing cases";
  }
}

// The first index at which two id sequences differ (their common length when one is a prefix).
size_t first_difference(const std::vector<int>& a, const std::vector<int>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

TEST_P(TokenizerGolden, MatchesReferenceOnOneLongText) {
  const tok::Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const json reference = fixture_json(GetParam(), "long_reference.json");
  std::ifstream in(std::string(STRATA_TOKENIZER_DATA) + "/long_text.txt", std::ios::binary);
  ASSERT_TRUE(in) << "long_text.txt missing from tests/data/tokenizers.tar.xz";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), 100000u);
  ASSERT_NE(text.find('\r'), std::string::npos) << "the text must keep its carriage returns";

  const auto ids = reference.at("ids").get<std::vector<int>>();
  const auto got = tokenizer.encode(text, false);
  const size_t at = first_difference(got, ids);
  EXPECT_TRUE(got == ids) << "first difference at id " << at << " of " << ids.size() << " (strata "
                          << got.size() << " ids)";
  EXPECT_EQ(tokenizer.encode(text, true), reference.at("ids_with_special").get<std::vector<int>>());
  EXPECT_TRUE(tokenizer.decode(ids, false) == reference.at("decoded").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, TokenizerGolden, ::testing::ValuesIn(kTokenizerFixtures));

}  // namespace
}  // namespace strata::test
