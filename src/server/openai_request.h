#pragma once
// The request side of OpenAI's POST /v1/completions and /v1/chat/completions: the body read
// into one ServeRequest per choice (prompts encoded, chat messages rendered through the chat
// template with the request's tools, the sampling controls of request_fields.h).
#include <string>
#include <vector>

#include "server/serving.h"

namespace strata {

struct CompletionRequest {
  bool chat = false;
  // Prompt-major: candidate k = prompt k / best_of, sample k % best_of.
  std::vector<ServeRequest> choices;
  std::vector<int> prompt_tokens;  // per prompt
  int n = 1;                       // choices answered per prompt
  // Candidates run per prompt (completions' best_of, else n): the n with the highest mean
  // token logprob are answered.
  int best_of = 1;
  bool stream = false, include_usage = false;
  bool logprobs = false;
  // Completions' echo: each choice's text starts with its prompt's text (prompt_texts, per
  // prompt), and with logprobs its logprobs cover the prompt tokens too.
  bool echo = false;
  std::vector<std::string> prompt_texts;
  ordered_json tools;               // chat: the request's tools offered to the model (null: none)
  std::string tool_choice;          // "auto" | "none" | "required" | "function" (named)
  std::string tool_name;            // tool_choice naming a function: its name
  bool parallel_tool_calls = true;  // false: tool_choice "required" makes exactly one call
  std::string tool_format;  // tools offered, tool_choice auto: how calls are read (tool_calls.h)
  std::string reasoning_format;  // --reasoning-parser (chat): reasoning_content split off
};

// The prompt of chat `messages` in `body` (with add_generation_prompt, default true, and
// chat_template_kwargs) rendered through the chat template with `tools` (null: none) and
// returned as text (encode it without special tokens, as transformers' apply_chat_template
// does: the template writes them).
// `body` as written (ordered_json), so that objects keep their key order in the template.
std::string chat_prompt_text(const ServerContext& ctx, const ordered_json& body,
                             const ordered_json& tools);

// 400 / 404 (unknown model) as HttpError naming the field.
// `ordered`: the same body parsed as ordered_json (messages and tools reach the template as
// written).
CompletionRequest parse_completion_request(const ServerContext& ctx, const json& body,
                                           const ordered_json& ordered, bool chat);

}  // namespace strata
