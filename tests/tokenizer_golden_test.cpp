// Tokenizers against Hugging Face `tokenizers` (reference.json of each fixture in
// tests/data/tokenizers.tar.xz): ids without and with special tokens, and decoded text.
#include <gtest/gtest.h>

#include <fstream>
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

INSTANTIATE_TEST_SUITE_P(AllFixtures, TokenizerGolden, ::testing::ValuesIn(kTokenizerFixtures));

}  // namespace
}  // namespace strata::test
