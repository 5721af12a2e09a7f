// The tiny ChatML tokenizer made for the 512-id model fixtures (tests/data/tokenizers/
// tiny_chatml, made by tests/data/tools/make_tiny_tokenizer.js) against the outputs of the
// library that trained it, Hugging Face `tokenizers`: encoding with and without special
// tokens, decoding arbitrary id sequences (partial UTF-8, special tokens skipped or not),
// incremental decoding, and the chat template; and the server's codec over it.
#include <gtest/gtest.h>

#include <fstream>

#include "server/tokenizer_codec.h"
#include "server_harness.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/decode_stream.h"

namespace strata::test {
namespace {

json read_reference(const std::string& file) {
  std::ifstream in(tiny_tokenizer_dir() + "/" + file);
  EXPECT_TRUE(in) << tiny_tokenizer_dir() + "/" + file;
  return json::parse(in);
}

TEST(TinyChatmlTokenizer, EncodesAndDecodesAsHuggingFace) {
  const auto tokenizer = tok::Tokenizer::load(tiny_tokenizer_dir());
  EXPECT_EQ(tokenizer.vocab_size(), 512);  // = the fixtures' vocab_size
  const json reference = read_reference("reference.json");
  ASSERT_GE(reference.at("cases").size(), 20u);
  for (const json& c : reference.at("cases")) {
    const std::string text = c.at("text");
    const auto ids = c.at("ids").get<std::vector<int>>();
    EXPECT_EQ(tokenizer.encode(text, false), ids) << json(text).dump();
    EXPECT_EQ(tokenizer.encode(text, true), c.at("ids_with_special").get<std::vector<int>>())
        << json(text).dump();
    EXPECT_EQ(tokenizer.decode(ids, false), c.at("decoded").get<std::string>())
        << json(text).dump();
  }
  ASSERT_GE(reference.at("decodes").size(), 50u);
  for (const json& d : reference.at("decodes")) {
    const auto ids = d.at("ids").get<std::vector<int>>();
    const bool skip = d.at("skip_special_tokens");
    const std::string expected = d.at("text");
    EXPECT_EQ(tokenizer.decode(ids, skip), expected) << d.at("ids").dump() << " skip " << skip;
    // Streamed piece by piece, the text is the same.
    tok::DecodeStream stream(tokenizer, skip);
    std::string streamed;
    for (int id : ids) streamed += stream.step(id);
    streamed += stream.finish();
    EXPECT_EQ(streamed, expected) << d.at("ids").dump() << " skip " << skip;
  }
}

TEST(TinyChatmlTokenizer, ChatTemplateRendersAsHuggingFaceJinja) {
  const auto tokenizer = tok::Tokenizer::load(tiny_tokenizer_dir());
  const auto chat = tok::ChatTemplate::load(tiny_tokenizer_dir());
  const json reference = read_reference("chat_reference.json");
  ASSERT_GE(reference.at("cases").size(), 4u);
  for (const json& c : reference.at("cases")) {
    const std::string text = chat.render(c.at("messages"), c.at("add_generation_prompt"));
    EXPECT_EQ(text, c.at("text").get<std::string>());
    EXPECT_EQ(tokenizer.encode(text, false), c.at("ids").get<std::vector<int>>());
  }
}

TEST(TinyChatmlTokenizer, ServerCodecDropsIdsTheTokenizerLacksAsHuggingFaceDoes) {
  const auto codec = TokenizerCodec::load(tiny_tokenizer_dir());
  EXPECT_EQ(codec->eos_token_id(), 511);  // <|im_end|>
  const std::vector<int> hello = codec->encode("Hello world", true);
  std::vector<int> padded = hello;
  padded.insert(padded.begin() + 1, {600, -1});  // a padded model vocabulary's ids
  EXPECT_EQ(codec->decode(padded, true), "Hello world");
  auto stream = codec->stream(true);
  std::string streamed;
  for (int id : padded) streamed += stream->step(id);
  EXPECT_EQ(streamed + stream->finish(), "Hello world");
  EXPECT_EQ(codec->token_text(600), "");
  EXPECT_EQ(codec->token_text(510), "<|im_start|>");  // logprobs name special tokens
  EXPECT_EQ(codec->apply_chat_template(json::array({{{"role", "user"}, {"content", "Hi"}}}),
                                       json::object()),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace strata::test
