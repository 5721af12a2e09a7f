// Unit tests of the tokenizer pieces on small hand-written tokenizer.json specs.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace strata::tok {
namespace {

using nlohmann::json;

// A tiny byte-level BPE: bytes of "a", "b", " ", merges a+b, " "+ab.
json tiny_byte_level() {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  json vocab = json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b)
    vocab[alphabet.from_bytes(std::string(1, static_cast<char>(b)))] = next++;
  vocab["ab"] = next++;
  vocab["Ġab"] = next++;
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "Ġ ab"})}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens",
       json::array({{{"id", 300}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
                    {{"id", 301},
                     {"content", "<tag>"},
                     {"special", false},
                     {"normalized", false},
                     {"lstrip", true},
                     {"rstrip", true}}})},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens",
         {{"<|end|>", {{"id", "<|end|>"}, {"ids", {300}}, {"tokens", {"<|end|>"}}}}}}}}};
}

TEST(Tokenizer, ByteLevelBpeMergesAndAddedTokens) {
  const Tokenizer t(tiny_byte_level(), "tiny");
  EXPECT_EQ(t.encode("ab ab"), (std::vector<int>{256, 257}));
  EXPECT_EQ(t.encode("ab ab", true), (std::vector<int>{300, 256, 257}));
  EXPECT_EQ(t.encode("ab<|end|>ab"), (std::vector<int>{256, 300, 256}));
  // lstrip/rstrip: the spaces around <tag> belong to it.
  EXPECT_EQ(t.encode("ab  <tag>  ab"), (std::vector<int>{256, 301, 256}));
  EXPECT_EQ(t.decode(std::vector<int>{256, 300, 257}), "ab<|end|> ab");
  EXPECT_EQ(t.decode(std::vector<int>{256, 300, 257}, true), "ab ab");
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(301));
  EXPECT_EQ(t.token_to_id("Ġab"), 257);
}

TEST(Tokenizer, InvalidUtf8IsARequestError) {
  const Tokenizer t(tiny_byte_level(), "tiny");
  EXPECT_THROW(t.encode(std::string("a\xC3", 2)), RequestError);
  EXPECT_THROW(t.encode(std::string("\xFF")), RequestError);
  EXPECT_THROW(t.decode(std::vector<int>{999999}), RequestError);
}

TEST(Tokenizer, UnsupportedComponentsAreNamedAtLoad) {
  auto expect_error = [](json spec, const std::string& needle) {
    try {
      Tokenizer t(spec, "spec.json");
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  json spec = tiny_byte_level();
  spec["normalizer"] = {{"type", "BertNormalizer"}};
  expect_error(spec, "BertNormalizer");
  spec = tiny_byte_level();
  spec["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(spec, "Whitespace");
  spec = tiny_byte_level();
  spec["decoder"] = {{"type", "WordPiece"}};
  expect_error(spec, "WordPiece");
  spec = tiny_byte_level();
  spec["model"]["type"] = "Unigram";
  expect_error(spec, "Unigram");
  spec = tiny_byte_level();
  spec["post_processor"] = {{"type", "Mystery"}};
  expect_error(spec, "Mystery");
  spec = tiny_byte_level();
  spec["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_error(spec, "does not compile");
}

// Ids that are not integers in 0..kMaxTokenId are load errors naming the entry, in the vocab,
// the added tokens and the post-processor alike: a float taken for an int was undefined
// behavior (the tokenizer fuzzer's 2.7e79), and a huge id sized the id tables by itself.
TEST(Tokenizer, TokenIdsOutOfRangeAreNamedAtLoad) {
  auto expect_error = [](const json& spec, const std::string& needle) {
    try {
      Tokenizer t(spec, "spec.json");
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("a token id must be an integer in 0.."),
                std::string::npos)
          << e.what();
    }
  };
  for (const json& bad : {json(2.7e79), json(1.5), json(-1), json(int64_t{1} << 40), json("7")}) {
    json spec = tiny_byte_level();
    spec["model"]["vocab"]["ab"] = bad;
    expect_error(spec, "model.vocab['ab']");
    spec = tiny_byte_level();
    spec["added_tokens"][0]["id"] = bad;
    expect_error(spec, "<|end|>");
    spec = tiny_byte_level();
    spec["post_processor"]["special_tokens"]["<|end|>"]["ids"] = json::array({bad});
    expect_error(spec, "post_processor special token '<|end|>'");
  }
}

TEST(Unicode, LossyConversionReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("a\xE4\xBD\xA0"), "a\xE4\xBD\xA0");
  EXPECT_EQ(utf8_lossy("\xE4\xBD"
                       "a"),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(utf8_stable_prefix("ab\xE4\xBD"), 2u);
  EXPECT_EQ(utf8_stable_prefix("ab\xFF"), 3u);
  EXPECT_EQ(utf8_first_invalid("ok\xC3("), 2u);
}

}  // namespace
}  // namespace strata::tok
