// Chat templates against transformers' apply_chat_template (chat_reference.json of the
// fixtures that ship a template): the rendered text, and its ids encoded without special
// tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer_fixtures.h"

namespace strata::test {
namespace {

using nlohmann::json;

class ChatTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, MatchesReference) {
  const auto chat = tok::ChatTemplate::load(tokenizer_fixture_dir(GetParam()));
  const tok::Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const json reference = fixture_json(GetParam(), "chat_reference.json");
  ASSERT_GE(reference.at("cases").size(), 4u);
  for (const json& c : reference.at("cases")) {
    const std::string text =
        chat.render(c.at("messages"), c.at("add_generation_prompt").get<bool>());
    EXPECT_EQ(text, c.at("text").get<std::string>()) << c.at("messages").dump();
    EXPECT_EQ(tokenizer.encode(text, false), c.at("ids").get<std::vector<int>>())
        << json(text).dump();
  }
}

INSTANTIATE_TEST_SUITE_P(TemplatedFixtures, ChatTemplateGolden,
                         ::testing::Values("qwen3", "llama3", "deepseek_v3"));

TEST(ChatTemplateLoad, MissingTemplateIsAClearError) {
  try {
    tok::ChatTemplate::load(tokenizer_fixture_dir("llama2"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::test
