#pragma once
// A chat answer's text split into reasoning_content, content and tool calls as it arrives:
// the reasoning parser (reasoning.h) first, then the tool-call parser (tool_calls.h) over the
// content; gpt-oss's channels (harmony.h) give all three at once. The whole answer is split
// by feeding it at once, so a stream's pieces always join to the whole answer's.
#include <memory>
#include <string>
#include <vector>

#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace strata {

class AnswerStream {
 public:
  // Empty formats: none (then content passes through as it came).
  AnswerStream(const std::string& reasoning_format, const std::string& tool_format);
  struct Parts {
    std::string reasoning, content;
    std::vector<ToolCall> calls;  // only from finish()
    // A stream's delta.tool_calls entries, from feed() as calls arrive and from finish().
    std::vector<ToolCallDelta> call_deltas;
  };
  Parts feed(const std::string& delta);
  Parts finish();
  // The whole answer split (feed + finish).
  static Parts split(const std::string& reasoning_format, const std::string& tool_format,
                     const std::string& text);

 private:
  // harmony: deltas for what the calls in `calls` (of the answer so far, the last perhaps
  // unfinished) have grown by; the calls take the ids they were opened with.
  void stream_harmony_calls(std::vector<ToolCall>& calls, std::vector<ToolCallDelta>& deltas);

  bool harmony_ = false, tools_ = false;
  std::string text_;  // harmony: all so far
  size_t reasoning_sent_ = 0, content_sent_ = 0;
  struct StreamedCall {
    std::string id;
    size_t arguments_sent = 0;
  };
  std::vector<StreamedCall> harmony_calls_;  // harmony: the calls opened so far
  std::unique_ptr<ReasoningSplitter> reasoning_;
  std::unique_ptr<ToolCallStream> calls_;
};

}  // namespace strata
