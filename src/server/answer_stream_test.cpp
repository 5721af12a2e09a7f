// Reasoning and tool-call parsers on answers in the formats the model families write (the
// strings follow the model cards' and chat templates' examples: DeepSeek-V3's and V3.1's
// tool-call tokens, Mistral's [TOOL_CALLS] in both tokenizer generations, gpt-oss's harmony
// channels, Qwen3's and DeepSeek-R1's think blocks), whole and streamed in pieces of every size.
#include "server/answer_stream.h"

#include <gtest/gtest.h>

#include "server/harmony.h"

namespace strata {
namespace {

const std::string kDeepSeekV3 =
    "Let me look.<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>"
    "function<\uff5ctool\u2581sep\uff5c>get_weather\n```json\n{\"location\": \"Hangzhou\", "
    "\"unit\": \"c\"}\n```<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581call\u2581begin"
    "\uff5c>function<\uff5ctool\u2581sep\uff5c>get_time\n```json\n{\"tz\": \"CST\"}\n```<\uff5c"
    "tool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>";
const std::string kDeepSeekV31 =
    "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>get_weather"
    "<\uff5ctool\u2581sep\uff5c>{\"location\": \"Paris\"}<\uff5ctool\u2581call\u2581end\uff5c>"
    "<\uff5ctool\u2581calls\u2581end\uff5c>";
const std::string kMistralV3 =
    "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, "
    "France\", \"format\": \"celsius\"}}]</s>";
const std::string kMistralV11 =
    "[TOOL_CALLS]get_current_weather[ARGS]{\"location\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}";
const std::string kHarmony =
    "<|channel|>analysis<|message|>User asks weather in SF. Use the tool.<|end|><|start|>"
    "assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    "{\"location\":\"San Francisco\"}<|call|>";
const std::string kHarmonyFinal =
    "<|channel|>analysis<|message|>Simple greeting.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Hello! How can I help?<|return|>";

// The answer fed in pieces of `step` bytes joins to the whole answer's split.
AnswerStream::Parts streamed(const std::string& reasoning, const std::string& tools,
                             const std::string& text, size_t step) {
  AnswerStream s(reasoning, tools);
  AnswerStream::Parts all;
  for (size_t i = 0; i < text.size(); i += step) {
    auto p = s.feed(text.substr(i, step));
    EXPECT_TRUE(p.calls.empty());
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  auto p = s.finish();
  all.reasoning += p.reasoning;
  all.content += p.content;
  all.calls = p.calls;
  return all;
}

void expect_stream_equals_whole(const std::string& reasoning, const std::string& tools,
                                const std::string& text) {
  const auto whole = AnswerStream::split(reasoning, tools, text);
  for (size_t step : {1, 2, 3, 7, 1000}) {
    const auto s = streamed(reasoning, tools, text, step);
    EXPECT_EQ(s.reasoning, whole.reasoning) << step;
    EXPECT_EQ(s.content, whole.content) << step;
    ASSERT_EQ(s.calls.size(), whole.calls.size()) << step;
    for (size_t k = 0; k < s.calls.size(); ++k) {
      EXPECT_EQ(s.calls[k].name, whole.calls[k].name);
      EXPECT_EQ(s.calls[k].arguments, whole.calls[k].arguments);
    }
  }
}

TEST(AnswerStream, DeepSeekV3AndV31ToolCallTokens) {
  const auto a = AnswerStream::split("", "deepseekv3", kDeepSeekV3);
  EXPECT_EQ(a.content, "Let me look.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"location": "Hangzhou", "unit": "c"})");
  EXPECT_EQ(a.calls[1].name, "get_time");
  const auto b = AnswerStream::split("", "deepseekv31", kDeepSeekV31);
  EXPECT_EQ(b.content, "");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].name, "get_weather");
  EXPECT_EQ(b.calls[0].arguments, R"({"location": "Paris"})");
  expect_stream_equals_whole("", "deepseekv3", kDeepSeekV3);
  // Plain text stays content, also when it merely mentions a tool.
  EXPECT_EQ(AnswerStream::split("", "deepseekv3", "no calls").content, "no calls");
}

TEST(AnswerStream, MistralListAndPerCallForms) {
  const auto a = AnswerStream::split("", "mistral", kMistralV3);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_current_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"location": "Paris, France", "format": "celsius"})");
  const auto b = AnswerStream::split("", "mistral", kMistralV11);
  ASSERT_EQ(b.calls.size(), 2u);
  EXPECT_EQ(b.calls[1].name, "get_time");
  EXPECT_EQ(b.calls[1].arguments, "{}");
  expect_stream_equals_whole("", "mistral", kMistralV11);
  // Mistral Small 3.2's template writes the call's id too: NAME[CALL_ID]ID[ARGS]{...}.
  const auto c = AnswerStream::split(
      "", "mistral", "[TOOL_CALLS]get_time[CALL_ID]abc123xyz[ARGS]{\"tz\": \"CET\"}");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_time");
  EXPECT_EQ(c.calls[0].id, "abc123xyz");
  EXPECT_EQ(c.calls[0].arguments, R"({"tz": "CET"})");  // the model's own text
  expect_stream_equals_whole("", "mistral",
                             "[TOOL_CALLS]get_time[CALL_ID]abc123xyz[ARGS]{\"tz\": \"CET\"}");
  // Broken JSON: the whole text is content (vLLM's behaviour).
  const std::string broken = "[TOOL_CALLS] [{\"name\": \"x\", \"arguments\": {";
  EXPECT_EQ(AnswerStream::split("", "mistral", broken).content, broken);
}

TEST(AnswerStream, GptOssHarmonyChannels) {
  const auto a = AnswerStream::split("gpt-oss", "gpt-oss", kHarmony);
  EXPECT_EQ(a.reasoning, "User asks weather in SF. Use the tool.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"location":"San Francisco"})");
  const auto b = AnswerStream::split("gpt-oss", "", kHarmonyFinal);
  EXPECT_EQ(b.reasoning, "Simple greeting.");
  EXPECT_EQ(b.content, "Hello! How can I help?");
  EXPECT_TRUE(b.calls.empty());
  expect_stream_equals_whole("gpt-oss", "gpt-oss", kHarmony);
  expect_stream_equals_whole("gpt-oss", "", kHarmonyFinal);
  // Tools not offered: a call is not answered as one.
  EXPECT_TRUE(AnswerStream::split("gpt-oss", "", kHarmony).calls.empty());
  // Text that does not follow the format is content.
  EXPECT_EQ(parse_harmony("just text").content, "just text");
}

// gpt-oss's call (the harmony docs' example, with a commentary preamble first) fed in pieces:
// the call opens with its id and name once its header is whole, then its arguments go out as
// they arrive, before <|call|> ends them, and join to the whole answer's arguments.
TEST(AnswerStream, GptOssCallsStreamAsTheyArrive) {
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant<|channel|>"
      "commentary<|message|>Checking the weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_current_weather <|constrain|>json<|message|>{\"location\": \"San "
      "Francisco, CA\", \"unit\": \"celsius\"}<|call|>";
  const auto whole = AnswerStream::split("gpt-oss", "gpt-oss", text);
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.content, "Checking the weather.");
  const std::string args = R"({"location": "San Francisco, CA", "unit": "celsius"})";
  EXPECT_EQ(whole.calls[0].arguments, args);
  const size_t call_end = text.find("<|call|>");
  for (size_t step : {1, 2, 3, 7, 1000}) {
    AnswerStream s("gpt-oss", "gpt-oss");
    std::vector<ToolCallDelta> deltas;
    std::string content, before_end;  // the arguments sent before <|call|> was fed
    for (size_t i = 0; i < text.size(); i += step) {
      auto p = s.feed(text.substr(i, step));
      content += p.content;
      for (auto& d : p.call_deltas) {
        if (i + step <= call_end) before_end += d.arguments;
        deltas.push_back(std::move(d));
      }
    }
    auto p = s.finish();
    content += p.content;
    for (auto& d : p.call_deltas) deltas.push_back(std::move(d));
    EXPECT_EQ(content, whole.content) << step;
    ASSERT_GE(deltas.size(), 2u) << step;
    EXPECT_TRUE(deltas[0].opens);
    EXPECT_EQ(deltas[0].name, "get_current_weather");
    EXPECT_EQ(deltas[0].arguments, "");
    std::string joined;
    for (size_t k = 0; k < deltas.size(); ++k) {
      EXPECT_EQ(deltas[k].index, 0u);
      EXPECT_EQ(deltas[k].opens, k == 0) << step;
      joined += deltas[k].arguments;
    }
    EXPECT_EQ(joined, args) << step;
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].id, deltas[0].id);  // the id the stream opened it with
    EXPECT_EQ(p.calls[0].arguments, args);
    // Piece by piece, all but the closing brace and beyond went out before <|call|>.
    if (step < 1000) {
      EXPECT_GE(before_end.size(), args.size() - step) << step;
      EXPECT_EQ(args.rfind(before_end, 0), 0u) << step;
    }
  }
}

TEST(AnswerStream, Qwen3ThinkBlocksAndHermesCallsAfterThem) {
  const std::string text =
      "<think>\nThe user wants the weather.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const auto a = AnswerStream::split("qwen3", "hermes", text);
  EXPECT_EQ(a.reasoning, "\nThe user wants the weather.\n");
  EXPECT_EQ(a.content, "\n\nChecking.\n");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, R"({"city": "Oslo"})");
  expect_stream_equals_whole("qwen3", "hermes", text);
  // Thinking off (the template wrote the empty block into the prompt): all content.
  const auto b = AnswerStream::split("qwen3", "", "Hello there.");
  EXPECT_EQ(b.reasoning, "");
  EXPECT_EQ(b.content, "Hello there.");
  expect_stream_equals_whole("qwen3", "", "<think>cut off while thin");
  EXPECT_EQ(AnswerStream::split("qwen3", "", "<think>cut off").reasoning, "cut off");
}

TEST(AnswerStream, DeepSeekR1ReasonsFromTheStart) {
  // R1's template writes <think>\n into the prompt: the answer starts inside the block.
  const auto a = AnswerStream::split("deepseek-r1", "", "Okay, 2+2.\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(a.reasoning, "Okay, 2+2.\n");
  EXPECT_EQ(a.content, "\n\nThe answer is 4.");
  const auto b = AnswerStream::split("deepseek-r1", "", "<think>x</think>y");
  EXPECT_EQ(b.reasoning, "x");
  EXPECT_EQ(b.content, "y");
  EXPECT_EQ(AnswerStream::split("deepseek-r1", "", "still thinking").reasoning, "still thinking");
  expect_stream_equals_whole("deepseek-r1", "", "Okay, 2+2.\n</think>\n\nThe answer is 4.");
  expect_stream_equals_whole("deepseek-r1", "", "<think>x</thi");
}

TEST(AnswerStream, FormatNamesAndDetection) {
  for (const char* f : {"deepseekv3", "deepseek_v3", "mistral", "gpt-oss", "llama3_json"})
    EXPECT_TRUE(tool_call_format_known(f)) << f;
  EXPECT_FALSE(tool_call_format_known("pythonic"));
  for (const char* f : {"qwen3", "deepseek-r1", "gpt-oss"}) EXPECT_TRUE(reasoning_format_known(f));
  EXPECT_FALSE(reasoning_format_known("glm45"));
  EXPECT_EQ(detect_tool_call_format("...<\uff5ctool\u2581calls\u2581begin\uff5c>..."),
            "deepseekv3");
  EXPECT_EQ(detect_tool_call_format("[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]"), "mistral");
  EXPECT_EQ(detect_tool_call_format("<|start|>developer<|message|># Tools\n\n## functions\n\n"
                                    "namespace functions {\n}<|end|><|start|>assistant<|channel|>"),
            "gpt-oss");
  EXPECT_TRUE(keeps_special_tokens("gpt-oss"));
  EXPECT_FALSE(keeps_special_tokens("hermes"));
}

}  // namespace
}  // namespace strata
