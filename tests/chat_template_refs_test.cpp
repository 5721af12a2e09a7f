// Chat templates rendered by strata's Jinja engine against the references of
// tools/make_template_refs.py (transformers' apply_chat_template; see that script for the
// command): the templates vendored from llama.cpp's models/templates/ and the tokenizer
// fixtures' own, each with the conversations of tests/data/chat_templates/conversations.json,
// with and without tools. Where the reference failed (the template refuses the conversation),
// strata must fail too.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "server/tool_calls.h"
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

// conversations.json's "now" ("2026-03-14T09:26:53", local time, as the script's fixed clock).
std::tm fixed_time(const std::string& iso) {
  std::tm t{};
  std::istringstream in(iso);
  in >> std::get_time(&t, "%Y-%m-%dT%H:%M:%S");
  EXPECT_FALSE(in.fail()) << "conversations.json: 'now' is not YYYY-MM-DDTHH:MM:SS: " << iso;
  std::tm normalized = t;
  timegm(&normalized);  // fills the weekday and the day of the year (%A, %j)
  t.tm_wday = normalized.tm_wday;
  t.tm_yday = normalized.tm_yday;
  return t;
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
  // llama.cpp's models/templates/ (README.md names the commit), the two older ones vendored
  // before, and the three fixtures'.
  ASSERT_GE(refs["templates"].size(), 70u);
  const std::tm now = fixed_time(spec["now"].get<std::string>());
  int compared = 0;
  for (const auto& [name, t] : refs["templates"].items()) {
    const json specials = spec["special_tokens"].contains(name)
                              ? json::parse(spec["special_tokens"][name].dump())
                              : json::object();
    tok::ChatTemplate chat = load(name, specials);
    chat.fix_clock(now);
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
  EXPECT_GE(compared, 490);
}

// conversations.json's tool_call_formats (the README table's column): the parser that reads
// each template's calls, and whether strata picks it from the prompt the template renders with
// the tools (without --tool-call-parser); every other template's prompt names no format.
TEST(ChatTemplateRefs, TheToolCallFormatIsDetectedFromTheRenderedTools) {
  const json refs = json::parse(read_file(kDir + "/references.json"));
  const json spec = json::parse(read_file(kDir + "/conversations.json"));
  const json& formats = spec["tool_call_formats"];
  int detected = 0;
  for (const auto& [name, t] : refs["templates"].items()) {
    for (const auto& c : t["cases"]) {
      if (c["name"] != "tools_offered" || !c.contains("text")) continue;
      const std::string found = detect_tool_call_format(c["text"].get<std::string>());
      const bool listed = formats.contains(name);
      if (listed) {
        EXPECT_TRUE(tool_call_format_known(formats[name]["parser"])) << name;
      }
      if (listed && formats[name]["detected"].get<bool>()) {
        EXPECT_EQ(found, formats[name]["parser"].get<std::string>()) << name;
        ++detected;
      } else {
        EXPECT_EQ(found, "") << name << ": its prompt names a format; list it in "
                             << "conversations.json's tool_call_formats";
      }
    }
  }
  EXPECT_GE(detected, 19);
}

}  // namespace
}  // namespace strata::test
