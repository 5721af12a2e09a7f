#pragma once
// Where a tool call's name and arguments lie in an answer's text, found by one string-aware
// scan (JSON strings with their escapes, nesting depth) that reads a call as far as it has
// arrived. The stream (ToolCallStream) sends the arguments' bytes as they come from it, and the
// final parse (parse_tool_calls) takes the arguments' text from it too, so that the fragments
// streamed join to the final arguments. nlohmann-json still parses what the scan delimits: the
// scan finds boundaries, it does not decide validity.
#include <optional>
#include <string>
#include <vector>

namespace strata {

// The formats' markers (tool_calls.h describes the formats).
inline constexpr const char* kCallOpen = "<tool_call>";
inline constexpr const char* kCallClose = "</tool_call>";
inline constexpr const char* kPythonTag = "<|python_tag|>";
// DeepSeek-V3's (and R1's, V3.1's) tool-call tokens.
inline constexpr const char* kDsCallsBegin = "<\uff5ctool\u2581calls\u2581begin\uff5c>";
inline constexpr const char* kDsCallBegin = "<\uff5ctool\u2581call\u2581begin\uff5c>";
inline constexpr const char* kDsCallEnd = "<\uff5ctool\u2581call\u2581end\uff5c>";
inline constexpr const char* kDsSep = "<\uff5ctool\u2581sep\uff5c>";
// Mistral's control tokens (kept in the text: the server decodes these answers with
// special tokens).
inline constexpr const char* kMistralCalls = "[TOOL_CALLS]";
inline constexpr const char* kMistralArgs = "[ARGS]";
inline constexpr const char* kMistralCallId =
    "[CALL_ID]";  // Mistral Small 3.2: NAME[CALL_ID]ID[ARGS]

inline bool is_hermes(const std::string& format) {
  return format == "hermes" || format == "qwen25" || format == "qwen";
}
inline bool is_llama3(const std::string& format) {
  return format == "llama3" || format == "llama3_json" || format == "llama4";
}
inline bool is_deepseek(const std::string& format) {
  return format == "deepseekv3" || format == "deepseek_v3" || format == "deepseekv31" ||
         format == "deepseek_v31";
}

// Where a llama3 answer's calls begin (after whitespace and <|python_tag|>), or npos when the
// answer is not calls.
size_t llama3_calls_start(const std::string& text);

// The end (one past) of the JSON value starting at `start` (an object, array, string or
// literal); npos when it has not ended within `s` yet.
size_t json_value_end(const std::string& s, size_t start);

// A call in the text, as far as it has arrived.
struct CallSpan {
  size_t begin = std::string::npos;       // the call's first byte (its object's '{')
  bool object = false;                    // the call is a {"name", "arguments"} object
  std::optional<std::string> name;        // once the name is whole
  std::optional<std::string> id;          // the call id the model wrote (Mistral's [CALL_ID])
  size_t args_begin = std::string::npos;  // the arguments value's first byte
  size_t args_end = std::string::npos;    // one past its last byte, once it has ended
  bool args_object = false;               // the value is an object (streamable text)
  bool closed = false;                    // the call (its object or its markers) has ended
  size_t end = std::string::npos;         // one past the call, once closed
  // How many of the arguments' bytes may go out now: all of an object that has arrived so far
  // (within the call's markers); none of other values (they go out whole).
  size_t args_arrived = 0;
};

// A {"name": ..., "arguments" | "parameters": ...} object starting at `start` (its '{'), read
// no further than `limit`; the first of the two argument keys is the arguments.
CallSpan scan_call_object(const std::string& s, size_t start, size_t limit = std::string::npos);

// The calls of an answer in `format` (tool_calls.h), from the first call marker on; only the
// last may be unclosed. Empty for gpt-oss, whose calls AnswerStream streams from its channels.
std::vector<CallSpan> scan_calls(const std::string& format, const std::string& text);

}  // namespace strata
