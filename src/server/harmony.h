#pragma once
// gpt-oss's "harmony" answer format, read from the decoded text (special tokens kept): a
// sequence of messages, each `[<|start|>assistant]<|channel|>CHANNEL[ to=RECIPIENT]
// [<|constrain|>json]<|message|>BODY` ended by <|end|>, <|call|> or <|return|> (or by the end
// of the text). The `analysis` channel is the reasoning, `final` the answer's content, and a
// `commentary` message to `functions.NAME` a tool call whose body is the arguments (other
// commentary, a preamble, is content). Text without any <|message|> is all content (a model
// that did not follow the format).
#include <string>
#include <vector>

#include "server/tool_calls.h"

namespace strata {

struct HarmonyAnswer {
  std::string reasoning, content;
  std::vector<ToolCall> calls;  // complete ones only (a call's body ends at <|call|>)
};

// `complete_only`: leave out the unfinished last call (a stream that may still grow).
HarmonyAnswer parse_harmony(const std::string& text, bool complete_only = false);

}  // namespace strata
