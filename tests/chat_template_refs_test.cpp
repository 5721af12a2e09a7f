// Chat templates rendered by strata's Jinja engine against the references of
// tools/make_template_refs.py (transformers' apply_chat_template; see that script for the
// command): the templates vendored from llama.cpp's models/templates/ and the tokenizer
// fixtures' own, each with the conversations of tests/data/chat_templates/conversations.json,
// with and without tools. Where the reference failed (the template refuses the conversation),
// strata must fail too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer_fixtures.h"

namespace strata::test {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::string kDir = std::string(STRATA_TEST_DATA) + "/chat_templates";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

tok::ChatTemplate load(const std::string& name, const json& specials) {
  if (name.size() > 6 && name.substr(name.size() - 6) == ".jinja")
    return tok::ChatTemplate(read_file(kDir + "/" + name), specials);
  return tok::ChatTemplate::load(tokenizer_fixture_dir(name));  // a fixture's own template
}

TEST(ChatTemplateRefs, EveryTemplateRendersAsTheReference) {
  const std::string refs_path = kDir + "/references.json";
  ASSERT_TRUE(std::filesystem::exists(refs_path))
      << "make it with: python3 tools/make_template_refs.py --out " << refs_path;
  const json refs = json::parse(read_file(refs_path));
  // Ordered: the messages and tools reach the templates with their keys as written.
  const ordered_json spec = ordered_json::parse(read_file(kDir + "/conversations.json"));
  std::cout << "references made with " << refs["engine"].get<std::string>() << "\n";
  ASSERT_GE(refs["templates"].size(), 8u);
  int compared = 0;
  for (const auto& [name, t] : refs["templates"].items()) {
    const json specials = spec["special_tokens"].contains(name)
                              ? json::parse(spec["special_tokens"][name].dump())
                              : json::object();
    const tok::ChatTemplate chat = load(name, specials);
    for (const auto& c : t["cases"]) {
      const ordered_json* conv = nullptr;
      for (const auto& s : spec["cases"])
        if (s["name"] == c["name"]) conv = &s;
      ASSERT_NE(conv, nullptr) << c["name"];
      ordered_json extra = conv->value("kwargs", ordered_json::object());
      if (conv->value("with_tools", false)) extra["tools"] = spec["tools"];
      const std::string where = name + " / " + c["name"].get<std::string>();
      std::string text, error;
      try {
        text =
            chat.render((*conv)["messages"], (*conv)["add_generation_prompt"].get<bool>(), extra);
      } catch (const Error& e) {
        error = e.what();
      }
      if (c.contains("error")) {
        EXPECT_FALSE(error.empty()) << where << ": the reference failed (" << c["error"]
                                    << ") but strata rendered " << json(text).dump();
      } else {
        EXPECT_EQ(error, "") << where;
        EXPECT_EQ(text, c["text"].get<std::string>()) << where;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 40);
}

}  // namespace
}  // namespace strata::test
