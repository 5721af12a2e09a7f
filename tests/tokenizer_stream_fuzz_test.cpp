// Streaming detokenization and a seeded fuzz of encode/decode over every fixture tokenizer.
//  - DecodeStream: the concatenated stream equals decode(all ids), for real text and for
//    random id sequences (which include broken UTF-8 and special tokens).
//  - encode never crashes: arbitrary bytes either encode or, when not UTF-8, raise a
//    RequestError (strata's documented policy; nothing is replaced silently).
//  - decode(encode(s)) == s for valid text without added-token strings (NFC(s) for
//    tokenizers that normalize with NFC), which is what these tokenizers promise.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_fixtures.h"

namespace strata::test {
namespace {

using nlohmann::json;

std::string stream_all(const tok::Tokenizer& t, const std::vector<int>& ids, bool skip_special) {
  tok::DecodeStream stream(t, skip_special);
  std::string out;
  for (int id : ids) {
    const std::string piece = stream.step(id);
    EXPECT_EQ(tok::utf8_first_invalid(piece), std::string::npos) << "streamed piece is not UTF-8";
    out += piece;
  }
  return out + stream.finish();
}

// Random text from code points that stress tokenizers: ASCII, whitespace runs, Latin-1,
// combining marks, CJK, emoji with joiners, digits.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::pair<char32_t, char32_t>> kRanges = {
      {0x20, 0x7E},       {0x20, 0x20},     {0x09, 0x0D},     {0xA0, 0xFF},
      {0x300, 0x36F},     {0x400, 0x4FF},   {0x4E00, 0x4E50}, {0x3040, 0x30FF},
      {0x1F600, 0x1F64F}, {0x200B, 0x200D}, {0x30, 0x39},     {0xAC00, 0xAC50}};
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 40)(rng);
  for (int i = 0; i < n; ++i) {
    const auto& [lo, hi] =
        kRanges[std::uniform_int_distribution<size_t>(0, kRanges.size() - 1)(rng)];
    tok::utf8_append(s, std::uniform_int_distribution<char32_t>(lo, hi)(rng));
  }
  return s;
}

std::string random_bytes(std::mt19937& rng) {
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 24)(rng);
  for (int i = 0; i < n; ++i)
    s += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
  return s;
}

bool contains_added_token(const tok::Tokenizer& t, const std::string& s) {
  for (const auto& a : t.added_tokens())
    if (s.find(a.content) != std::string::npos) return true;
  return false;
}

class TokenizerStreamFuzz : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerStreamFuzz, StreamOfReferenceTextEqualsDecode) {
  const tok::Tokenizer& t = fixture_tokenizer(GetParam());
  const json reference = fixture_json(GetParam(), "reference.json");  // outlives the loop
  for (const json& c : reference.at("cases")) {
    const auto ids = c.at("ids_with_special").get<std::vector<int>>();
    for (bool skip : {false, true})
      EXPECT_EQ(stream_all(t, ids, skip), t.decode(ids, skip)) << c.at("text").dump();
  }
}

TEST_P(TokenizerStreamFuzz, StreamOfRandomIdsEqualsDecode) {
  const tok::Tokenizer& t = fixture_tokenizer(GetParam());
  std::mt19937 rng(1234);
  std::vector<int> specials;
  for (const auto& a : t.added_tokens()) specials.push_back(a.id);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int> ids;
    const int n = std::uniform_int_distribution<int>(1, 30)(rng);
    while (static_cast<int>(ids.size()) < n) {
      int id;
      const int pick = std::uniform_int_distribution<int>(0, 9)(rng);
      if (pick == 0 && !specials.empty())
        id = specials[rng() % specials.size()];
      else if (pick < 4)
        id = std::uniform_int_distribution<int>(0, 600)(rng);  // bytes and byte pieces
      else
        id = std::uniform_int_distribution<int>(0, t.vocab_size() - 1)(rng);
      if (t.id_to_token(id)) ids.push_back(id);
    }
    const bool skip = trial % 2 == 1;
    ASSERT_EQ(stream_all(t, ids, skip), t.decode(ids, skip)) << "ids: " << json(ids).dump();
  }
}

TEST_P(TokenizerStreamFuzz, EncodeNeverCrashesAndRoundTrips) {
  const tok::Tokenizer& t = fixture_tokenizer(GetParam());
  const json spec = fixture_json(GetParam(), "tokenizer.json");
  const bool nfc = spec.at("normalizer").dump().find("\"NFC\"") != std::string::npos;
  const auto nfc_normalizer = tok::make_normalizer(json{{"type", "NFC"}});
  std::mt19937 rng(42);
  int round_trips = 0, rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::string s = trial % 2 ? random_bytes(rng) : random_text(rng);
    if (tok::utf8_first_invalid(s) != std::string::npos) {
      EXPECT_THROW(t.encode(s, true), RequestError);
      ++rejected;
      continue;
    }
    std::vector<int> ids;
    ASSERT_NO_THROW(ids = t.encode(s, true)) << json(s).dump();
    for (int id : ids) ASSERT_TRUE(id >= 0 && id < t.vocab_size());
    if (contains_added_token(t, s)) continue;
    std::string expected = s;
    if (nfc) nfc_normalizer->normalize(expected);
    EXPECT_EQ(t.decode(t.encode(s, false)), expected) << json(s).dump();
    ++round_trips;
  }
  EXPECT_GT(round_trips, 150);
  EXPECT_GT(rejected, 50);
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, TokenizerStreamFuzz, ::testing::ValuesIn(kTokenizerFixtures));

}  // namespace
}  // namespace strata::test
