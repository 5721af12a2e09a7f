// --reasoning-parser over HTTP (reasoning_content whole and streamed), the chat fields
// continue_final_message and add_generation_prompt, and --chat-template's choice of a file or
// a named template, with the tiny Llama and the tiny ChatML tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "server_harness.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"

namespace strata {

namespace {

using test::Harness;

std::unique_ptr<Harness> chat_harness(ServerOptions so = {}) {
  return std::make_unique<Harness>("llama", test::harness_runner_options(4096, 16),
                                   SchedulerOptions{}, test::tiny_tokenizer_dir(), "llama",
                                   std::move(so));
}

const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hello! Who are you?"}}}},
                    {"max_tokens", 8},
                    {"temperature", 0},
                    {"ignore_eos", true}};

}  // namespace

TEST(ServerReasoning, ReasoningContentWholeAndStreamed) {
  auto plain = chat_harness();
  const auto [s0, base] = plain->post("/v1/chat/completions", kChat);
  ASSERT_EQ(s0, 200) << base.dump();
  const std::string text = base["choices"][0]["message"]["content"];
  EXPECT_FALSE(base["choices"][0]["message"].contains("reasoning_content"));
  // deepseek-r1: the answer reasons from its start; without </think> it is all reasoning.
  ServerOptions so;
  so.reasoning_parser = "deepseek-r1";
  auto r1 = chat_harness(so);
  const auto [s1, thought] = r1->post("/v1/chat/completions", kChat);
  ASSERT_EQ(s1, 200) << thought.dump();
  EXPECT_EQ(thought["choices"][0]["message"]["reasoning_content"], text) << thought.dump();
  EXPECT_EQ(thought["choices"][0]["message"]["content"], "");
  json body = kChat;
  body["stream"] = true;
  bool done = false;
  std::string reasoning, content;
  for (const auto& e : r1->stream("/v1/chat/completions", body, &done))
    for (const auto& c : e["choices"]) {
      reasoning += c["delta"].value("reasoning_content", "");
      if (c["delta"].contains("content") && c["delta"]["content"].is_string())
        content += c["delta"]["content"].get<std::string>();
    }
  EXPECT_TRUE(done);
  EXPECT_EQ(reasoning, text);
  EXPECT_EQ(content, "");
  // qwen3: an answer that does not open <think> is all content.
  so.reasoning_parser = "qwen3";
  auto q = chat_harness(so);
  const auto [s2, answered] = q->post("/v1/chat/completions", kChat);
  ASSERT_EQ(s2, 200) << answered.dump();
  EXPECT_EQ(answered["choices"][0]["message"]["content"], text);
  EXPECT_TRUE(answered["choices"][0]["message"]["reasoning_content"].is_null());
}

TEST(ServerReasoning, ContinueFinalMessageEndsThePromptInsideIt) {
  auto h = chat_harness();
  const json messages = {{{"role", "user"}, {"content", "Count to three."}},
                         {{"role", "assistant"}, {"content", "One, two,"}}};
  auto prompt = [&](json extra) {
    extra["messages"] = messages;
    const auto [s, r] = h->post("/tokenize", extra);
    EXPECT_EQ(s, 200) << r.dump();
    return h->codec()->decode(r["tokens"].get<std::vector<int>>(), false);
  };
  const std::string continued = prompt({{"continue_final_message", true}});
  EXPECT_EQ(continued.substr(continued.size() - 9), "One, two,") << continued;
  const std::string closed = prompt({{"add_generation_prompt", false}});
  EXPECT_GT(closed.size(), continued.size());
  EXPECT_EQ(closed.rfind(continued, 0), 0u) << closed;  // the same up to the cut
  // Both at once contradict each other: a 400 naming add_generation_prompt.
  const auto [s, e] = h->post("/v1/chat/completions", json{{"messages", messages},
                                                           {"continue_final_message", true},
                                                           {"add_generation_prompt", true}});
  EXPECT_EQ(s, 400);
  EXPECT_EQ(e["error"]["param"], "add_generation_prompt") << e.dump();
  // On chat completions the answer continues the message: the prompt is the continued one.
  const auto [s2, r] =
      h->post("/v1/chat/completions",
              json{{"messages", messages}, {"continue_final_message", true}, {"max_tokens", 1}});
  ASSERT_EQ(s2, 200) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"], h->codec()->encode(continued, false).size());
}

TEST(ServerReasoning, ChatTemplateFileOrNamedTemplate) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(test::scratch_dir()) / "named_templates";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"chat_template",
               {{{"name", "default"}, {"template", "D:{{ messages[0]['content'] }}"}},
                {{"name", "tool_use"}, {"template", "T:{{ messages[0]['content'] }}"}}}}}
             .dump();
  std::ofstream(dir / "mine.jinja") << "F:{{ messages[0]['content'] }}";
  const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(tok::ChatTemplate::load(dir.string()).render(messages, true), "D:hi");
  EXPECT_EQ(tok::ChatTemplate::load(dir.string(), "tool_use").render(messages, true), "T:hi");
  EXPECT_EQ(
      tok::ChatTemplate::load(dir.string(), (dir / "mine.jinja").string()).render(messages, true),
      "F:hi");
  try {
    tok::ChatTemplate::load(dir.string(), "nope");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--chat-template 'nope'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("default, tool_use"), std::string::npos) << e.what();
  }
}

}  // namespace strata
