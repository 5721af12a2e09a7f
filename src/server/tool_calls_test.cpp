#include "server/tool_calls.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

// Answers in the formats the model cards document: Qwen2.5's function-calling guide (Hermes
// style, two parallel calls, text before them) and Llama 3.1's JSON tool calling (with and
// without <|python_tag|>, which skip_special_tokens drops).
const std::string kQwen =
    "I'll check both cities.\n<tool_call>\n{\"name\": \"get_current_temperature\", "
    "\"arguments\": {\"location\": \"San Francisco, CA, USA\", \"unit\": \"celsius\"}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": "
    "{\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\", \"unit\": "
    "\"celsius\"}}\n</tool_call>";
const std::string kLlama =
    "<|python_tag|>{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": "
    "\"San Francisco, CA\", \"unit\": \"Fahrenheit\"}}";

TEST(ToolCalls, HermesCallsAndTheContentBeforeThem) {
  const ParsedAnswer a = parse_tool_calls("qwen25", kQwen);
  EXPECT_EQ(a.content, "I'll check both cities.\n");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_current_temperature");
  // The arguments are the model's own JSON text (what a stream sends as it arrives).
  EXPECT_EQ(a.calls[0].arguments, R"({"location": "San Francisco, CA, USA", "unit": "celsius"})");
  EXPECT_EQ(a.calls[1].arguments,
            R"({"location": "San Francisco, CA, USA", "date": "2024-10-01", "unit": "celsius"})");
  EXPECT_EQ(a.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
}

TEST(ToolCalls, Llama3JsonCalls) {
  for (const std::string& text : {kLlama, kLlama.substr(std::string("<|python_tag|>").size()),
                                  " " + kLlama + "; {\"name\": \"b\", \"parameters\": {}}"}) {
    const ParsedAnswer a = parse_tool_calls("llama3", text);
    EXPECT_EQ(a.content, "") << text;
    ASSERT_GE(a.calls.size(), 1u) << text;
    EXPECT_EQ(a.calls[0].name, "get_current_conditions");
    EXPECT_EQ(a.calls[0].arguments, R"({"location": "San Francisco, CA", "unit": "Fahrenheit"})");
  }
  EXPECT_EQ(parse_tool_calls("llama3", " " + kLlama + "; {\"name\": \"b\"}").calls.size(), 2u);
}

TEST(ToolCalls, WhatDoesNotParseIsContent) {
  for (const auto& [format, text] : std::vector<std::pair<std::string, std::string>>{
           {"hermes", "The weather is fine."},
           {"hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1\n</tool_call>"},
           {"hermes", "<tool_call>\n{\"arguments\": {}}\n</tool_call>"},
           {"llama3", "Sure: {\"name\": \"f\", \"parameters\": {}}"},
           {"llama3", "{\"name\": \"f\", \"parameters\": {}} and then some words"},
           {"llama3", "{not json}"}}) {
    const ParsedAnswer a = parse_tool_calls(format, text);
    EXPECT_TRUE(a.calls.empty()) << text;
    EXPECT_EQ(a.content, text);
  }
  // A call cut off by max_tokens after its JSON is still a call (vLLM reads it too).
  EXPECT_EQ(
      parse_tool_calls("hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}").calls.size(),
      1u);
}

// Fed a few bytes at a time (as tokens decode), the stream sends the content before the first
// call and nothing of the calls, and ends with the same calls as the whole answer.
TEST(ToolCalls, AStreamSendsTheSameContentAndCalls) {
  for (const auto& [format, text] : std::vector<std::pair<std::string, std::string>>{
           {"hermes", kQwen},
           {"hermes", "No tools needed: 2 < 3 and <tool is a word."},
           {"llama3", kLlama},
           {"llama3", "  {\"name\": \"f\", \"parameters\": {\"a\": \"}\"}}"},
           {"llama3", "<|eot|> is not a python tag"},
           {"llama3", "Plain answer."}}) {
    for (size_t step : {1u, 3u, 7u}) {
      ToolCallStream s(format);
      std::string streamed;
      for (size_t i = 0; i < text.size(); i += step) streamed += s.feed(text.substr(i, step));
      const ParsedAnswer end = s.finish();
      streamed += end.content;
      const ParsedAnswer whole = parse_tool_calls(format, text);
      EXPECT_EQ(streamed, whole.content) << format << " step " << step << ": " << text;
      ASSERT_EQ(end.calls.size(), whole.calls.size()) << text;
      for (size_t k = 0; k < end.calls.size(); ++k) {
        EXPECT_EQ(end.calls[k].name, whole.calls[k].name);
        EXPECT_EQ(end.calls[k].arguments, whole.calls[k].arguments);
      }
    }
  }
}

// Calls stream as they arrive: a call opens (id, name, arguments "") once its name is whole,
// then its arguments come in fragments that join to the whole answer's arguments, with the ids
// the whole stream ends with. Arguments before the name go out in one piece.
TEST(ToolCalls, AStreamSendsEachCallsArgumentsAsTheyArrive) {
  const std::string args = R"({"city": "Oslo, \"NO\" {x}", "days": [1, 2, 3], "unit": "c"})";
  const std::string ds =
      "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>";
  const std::string ds_sep = "<\uff5ctool\u2581sep\uff5c>";
  const std::string ds_end = "<\uff5ctool\u2581call\u2581end\uff5c>";
  for (const auto& [format, text] : std::vector<std::pair<std::string, std::string>>{
           {"hermes", "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": " + args +
                          "}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": " + args +
                          "}\n</tool_call>"},
           {"llama3", "{\"name\": \"f\", \"parameters\": " + args +
                          "}; {\"name\": \"g\", "
                          "\"parameters\": " +
                          args + "}"},
           {"deepseekv3", ds + "function" + ds_sep + "f\n```json\n" + args + "\n```" + ds_end},
           {"deepseekv31", ds + "f" + ds_sep + args + ds_end},
           {"mistral", "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": " + args + "}]"},
           {"mistral", "[TOOL_CALLS]f[ARGS]" + args}}) {
    ToolCallStream s(format);
    std::vector<ToolCallDelta> deltas;
    for (size_t i = 0; i < text.size(); i += 4) {
      s.feed(text.substr(i, 4));
      for (auto& d : s.take_deltas()) deltas.push_back(std::move(d));
    }
    const ParsedAnswer end = s.finish();
    for (auto& d : s.take_deltas()) deltas.push_back(std::move(d));
    const ParsedAnswer whole = parse_tool_calls(format, text);
    ASSERT_FALSE(whole.calls.empty()) << text;
    ASSERT_EQ(end.calls.size(), whole.calls.size()) << text;
    for (size_t k = 0; k < whole.calls.size(); ++k) {
      EXPECT_EQ(whole.calls[k].arguments, args) << text;
      std::string joined;
      size_t fragments = 0, opened = 0;
      for (const ToolCallDelta& d : deltas) {
        if (d.index != k) continue;
        if (d.opens) {
          ++opened;
          EXPECT_EQ(fragments, 0u);
          EXPECT_EQ(d.id, end.calls[k].id);
          EXPECT_EQ(d.name, whole.calls[k].name);
          EXPECT_EQ(d.arguments, "");
        } else {
          ++fragments;
        }
        joined += d.arguments;
      }
      EXPECT_EQ(opened, 1u) << text;
      EXPECT_GT(fragments, 1u) << text;
      EXPECT_EQ(joined, whole.calls[k].arguments) << text;
    }
  }
  ToolCallStream late("hermes");  // the name after the arguments: the call comes whole
  late.feed("<tool_call>{\"arguments\": " + args);
  EXPECT_TRUE(late.take_deltas().empty());
  late.feed(R"(, "name": "f"}</tool_call>)");
  const auto d = late.take_deltas();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "f");
  EXPECT_EQ(d[1].arguments, args);
}

TEST(ToolCalls, TheFormatComesFromTheRenderedTemplateOrTheFlag) {
  EXPECT_EQ(detect_tool_call_format("...For each function call, return a json object with "
                                    "function name and arguments within <tool_call></tool_call> "
                                    "XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                                    "\"arguments\": <args-json-object>}\n</tool_call>"),
            "hermes");
  // <tool_call> around XML (Qwen3-Coder's, GLM's): not the hermes parser's JSON.
  EXPECT_EQ(detect_tool_call_format("<tool_call>\n<function=example_function_name>\n"
                                    "<parameter=example_parameter_1>\nvalue_1\n</parameter>"),
            "");
  EXPECT_EQ(detect_tool_call_format("<|start_header_id|>system<|end_header_id|>\n\nEnvironment: "
                                    "ipython\n..."),
            "llama3");
  EXPECT_EQ(detect_tool_call_format("<|im_start|>user\nhi<|im_end|>"), "");
  EXPECT_TRUE(tool_call_format_known("qwen25"));
  EXPECT_FALSE(tool_call_format_known("pythonic"));
  const json j = tool_calls_json({{"call_1", "f", "{}"}}, true);
  EXPECT_EQ(j[0]["index"], 0);
  EXPECT_EQ(j[0]["type"], "function");
  EXPECT_EQ(j[0]["function"]["arguments"], "{}");
}

}  // namespace
}  // namespace strata
