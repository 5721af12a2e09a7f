#pragma once
// Tool calls read from a chat answer's text, in the format of the model family (named as
// SGLang's and vLLM's --tool-call-parser):
//   hermes (= qwen25, qwen): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one
//     block per call; the content is the text before the first block.
//   llama3 (= llama3_json, llama4): the answer is the call(s): optionally <|python_tag|>,
//     then {"name": ..., "parameters": {...}} objects separated by ';'.
//   deepseekv3 (= deepseek_v3, deepseekv31): <｜tool▁calls▁begin｜>, then per call
//     <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
//     (V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>).
//   mistral: [TOOL_CALLS] then a JSON list of {"name", "arguments"}, or per call
//     [TOOL_CALLS]NAME[ARGS]{...} (tokenizer v11+).
//   gpt-oss (= openai, harmony): the harmony channels (harmony.h): a commentary message to
//     functions.NAME is a call.
// When the calls do not parse (invalid JSON, no name), the whole text is the content, as
// vLLM does. A stream holds back text from where a call may begin, so that the content
// streamed equals the content of the whole answer. A call's arguments are the model's JSON
// text (trimmed); a stream sends a call once its name is whole, then its arguments' bytes as
// they arrive (tool_call_scan.h finds them), so the fragments join to the whole answer's
// arguments. Arguments that come before the name, or that are not an object, go out whole.
#include <string>
#include <vector>

#include "model/json_util.h"

namespace strata {

bool tool_call_format_known(const std::string& name);
std::string tool_call_formats();                  // "hermes, qwen25, ..." for messages
bool is_harmony_format(const std::string& name);  // gpt-oss's channels
// Formats whose markers are special tokens (Mistral's [TOOL_CALLS], gpt-oss's <|channel|>):
// their answers are decoded with special tokens kept, or the markers would be dropped.
bool keeps_special_tokens(const std::string& format);
// The format a chat template asks for, from its prompt rendered with tools (it describes the
// call syntax to the model); empty when it names none of the known ones.
std::string detect_tool_call_format(const std::string& prompt_with_tools);

struct ToolCall {
  std::string id;  // "call_..." (OpenAI's spelling)
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ParsedAnswer {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedAnswer parse_tool_calls(const std::string& format, const std::string& text);

// One delta.tool_calls entry of a stream: a call opening (its id and name, and arguments ""
// or, for a call sent whole, all of them), or more of its arguments' text.
struct ToolCallDelta {
  size_t index = 0;
  bool opens = false;
  std::string id, name;
  std::string arguments;
};

// The same, as text arrives: feed() returns the content that may be sent now; finish() the
// rest of the content (empty when calls were found) and the calls, with the ids streamed.
// take_deltas() returns the call deltas that feed() and finish() found since the last take.
// Fragments sent for a call that turns out malformed cannot be taken back (vLLM's limit too).
class ToolCallStream {
 public:
  explicit ToolCallStream(std::string format) : format_(std::move(format)) {}
  std::string feed(const std::string& delta);
  ParsedAnswer finish();
  std::vector<ToolCallDelta> take_deltas();

 private:
  struct StreamedCall {
    std::string id;
    size_t arguments_sent = 0;  // bytes of its arguments text
  };
  void stream_calls();  // deltas for what the calls' text has grown by
  std::string format_;
  std::string text_;  // all so far
  size_t sent_ = 0;   // content already returned
  bool in_call_ = false;
  std::vector<StreamedCall> streamed_;
  std::vector<ToolCallDelta> deltas_;
};

// Deltas that send each call whole (formats read whole, forced calls).
std::vector<ToolCallDelta> whole_call_deltas(const std::vector<ToolCall>& calls);
json tool_call_delta_json(const ToolCallDelta& d);

// OpenAI's message.tool_calls / delta.tool_calls entries.
json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);

}  // namespace strata
