#include "server/openai_request.h"

#include <fmt/format.h>

#include "core/error.h"
#include "server/grammar_fields.h"
#include "server/request_fields.h"
#include "server/request_parsing.h"
#include "server/tool_calls.h"

namespace strata {

namespace {

constexpr int kMaxChoices = 128;
constexpr int kMaxTopLogprobs = 20;

// Fields OpenAI defines that change the answer in ways strata does not do.
void reject_unsupported(const json& body) {
  if (get_bool(body, "echo").value_or(false))
    throw HttpError(400, "'echo' is not supported by this server", "echo");
  if (const auto best_of = get_integer(body, "best_of");
      best_of && *best_of != get_integer(body, "n").value_or(1))
    throw HttpError(400, "'best_of' other than 'n' is not supported; use 'n'", "best_of");
  if (body.contains("suffix") && !body["suffix"].is_null())
    throw HttpError(400, "'suffix' is not supported", "suffix");
  if (get_bool(body, "continue_final_message").value_or(false))
    throw HttpError(400,
                    "'continue_final_message' is not supported; end the messages with a user "
                    "turn, or send the rendered prompt to /v1/completions",
                    "continue_final_message");
}

std::vector<std::vector<int>> completion_prompts(const ServerContext& ctx, const json& body) {
  if (!body.contains("prompt") || body["prompt"].is_null())
    throw HttpError(400, "'prompt' is required", "prompt");
  const json& p = body["prompt"];
  auto encode = [&](const json& text) {
    return encode_prompt(ctx, text.get<std::string>(), /*add_special_tokens=*/true, "prompt");
  };
  if (p.is_string()) return {encode(p)};
  if (!p.is_array() || p.empty())
    throw HttpError(400,
                    "'prompt' must be a string, a list of token ids, or a non-empty list of those",
                    "prompt");
  if (p[0].is_number()) return {to_token_ids(p, "prompt")};
  std::vector<std::vector<int>> prompts;
  for (const auto& x : p) {
    if (x.is_string())
      prompts.push_back(encode(x));
    else if (x.is_array())
      prompts.push_back(to_token_ids(x, "prompt"));
    else
      throw HttpError(400, "'prompt' lists must hold strings or lists of token ids", "prompt");
  }
  return prompts;
}

// The messages as chat templates expect them: `content` a string. OpenAI's list of content
// parts is joined when every part is text; other parts (images, audio) are refused.
ordered_json chat_messages(const ordered_json& body) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    throw HttpError(400, "'messages' must be a non-empty list of {\"role\", \"content\"} objects",
                    "messages");
  ordered_json messages = *it;
  for (auto& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw HttpError(400, "each message must be an object with a string 'role' and its 'content'",
                      "messages");
    // Templates index a call's arguments as an object; OpenAI sends them as JSON text
    // (vLLM parses them the same way before rendering).
    if (m.contains("tool_calls") && m["tool_calls"].is_array())
      for (auto& call : m["tool_calls"])
        if (call.is_object() && call.contains("function") && call["function"].is_object() &&
            call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
          ordered_json args =
              ordered_json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
          if (args.is_object()) call["function"]["arguments"] = args;
        }
    ordered_json& content = m["content"];
    if (content.is_null() || content.is_string()) continue;
    if (!content.is_array())
      throw HttpError(400, "a message's 'content' must be a string or a list of text parts",
                      "messages");
    std::string text;
    for (const auto& part : content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        throw HttpError(400,
                        "this server takes only text content parts ({\"type\": \"text\", "
                        "\"text\": ...}) in messages",
                        "messages");
      text += part["text"].get<std::string>();
    }
    content = text;
  }
  return messages;
}

// `tools`: [{"type": "function", "function": {"name", "description"?, "parameters"?}}], and
// `tool_choice`. Forcing a call ("required", or a named function) needs constrained
// decoding, which strata does not do: those are refused rather than left to chance.
void read_tools(const json& body, const ordered_json& ordered, CompletionRequest& c) {
  c.tool_choice = "auto";
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    if (tc.is_string()) {
      c.tool_choice = tc.get<std::string>();
      if (c.tool_choice != "auto" && c.tool_choice != "none" && c.tool_choice != "required")
        throw HttpError(400,
                        fmt::format("'tool_choice' must be \"auto\", \"none\", \"required\" or "
                                    "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, "
                                    "got \"{}\"",
                                    c.tool_choice),
                        "tool_choice");
    } else if (tc.is_object() && tc.contains("function") && tc["function"].is_object() &&
               tc["function"].contains("name") && tc["function"]["name"].is_string()) {
      c.tool_choice = "function";
      c.tool_name = tc["function"]["name"].get<std::string>();
    } else {
      throw HttpError(400,
                      "'tool_choice' must be a string or {\"type\": \"function\", \"function\": "
                      "{\"name\": ...}}",
                      "tool_choice");
    }
  }
  if (!body.contains("tools") || body["tools"].is_null()) {
    if (c.tool_choice == "required" || c.tool_choice == "function")
      throw HttpError(400, "'tool_choice' names a call but the request has no 'tools'",
                      "tool_choice");
    return;
  }
  const json& tools = body["tools"];
  if (!tools.is_array())
    throw HttpError(400, "'tools' must be a list of {\"type\": \"function\", \"function\": ...}",
                    "tools");
  for (const auto& t : tools) {
    if (!t.is_object() || t.value("type", "function") != "function" || !t.contains("function") ||
        !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      throw HttpError(400,
                      "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., "
                      "\"parameters\": ...}}",
                      "tools");
    if (t["function"].contains("parameters") && !t["function"]["parameters"].is_null() &&
        !t["function"]["parameters"].is_object())
      throw HttpError(400, "a tool's 'parameters' must be a JSON schema object", "tools");
  }
  if (c.tool_choice == "required" || c.tool_choice == "function")
    throw HttpError(400,
                    fmt::format("'tool_choice' \"{}\" forces a tool call, which needs constrained "
                                "decoding that this server does not do; use \"auto\"",
                                c.tool_choice == "function" ? "named function" : "required"),
                    "tool_choice");
  if (!tools.empty()) c.tools = ordered["tools"];  // as written, for the template's tojson
}

}  // namespace

std::string chat_prompt_text(const ServerContext& ctx, const ordered_json& body,
                             const ordered_json& tools) {
  const ordered_json messages = chat_messages(body);
  if (!ctx.codec)
    throw HttpError(400,
                    "this server has no tokenizer and so no chat template (its model directory "
                    "has no tokenizer.json); start it with --tokenizer-path DIR, or use "
                    "/v1/completions with the prompt as token ids",
                    "messages");
  ordered_json extra = ordered_json::object();
  // Template variables as vLLM passes them: the tools, add_generation_prompt, then
  // chat_template_kwargs over both.
  if (!tools.is_null() && !tools.empty()) extra["tools"] = tools;
  if (const auto agp = body.find("add_generation_prompt"); agp != body.end() && !agp->is_null()) {
    if (!agp->is_boolean())
      throw HttpError(400, "'add_generation_prompt' must be true or false",
                      "add_generation_prompt");
    extra["add_generation_prompt"] = agp->get<bool>();
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      throw HttpError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const auto& [k, v] : body["chat_template_kwargs"].items()) extra[k] = v;
  }
  return ctx.codec->apply_chat_template(messages, extra);
}

CompletionRequest parse_completion_request(const ServerContext& ctx, const json& body,
                                           const ordered_json& ordered, bool chat) {
  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "max_completion_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "min_p",
                                               "n",
                                               "stream",
                                               "stream_options",
                                               "logprobs",
                                               "stop",
                                               "stop_token_ids",
                                               "ignore_eos",
                                               "seed",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "repetition_penalty",
                                               "min_tokens",
                                               "logit_bias",
                                               "response_format",
                                               "regex",
                                               "ebnf",
                                               "skip_special_tokens"};
  std::set<std::string> known = common;
  static const std::vector<std::string> chat_only = {"messages",
                                                     "top_logprobs",
                                                     "tools",
                                                     "tool_choice",
                                                     "chat_template_kwargs",
                                                     "add_generation_prompt",
                                                     "continue_final_message"};
  static const std::vector<std::string> completion_only = {"prompt", "echo", "best_of", "suffix"};
  for (const auto& k : chat ? chat_only : completion_only) known.insert(k);
  check_fields(body, known, "the request");
  reject_unsupported(body);
  if (const auto model = get_string(body, "model");
      model && *model != ctx.options.served_model_name)
    throw HttpError(
        404,
        fmt::format("the model '{}' does not exist; this server serves '{}' (GET /v1/models)",
                    *model, ctx.options.served_model_name),
        "model", "model_not_found");

  CompletionRequest c;
  c.chat = chat;
  const int64_t n = get_integer(body, "n").value_or(1);
  if (n < 1 || n > kMaxChoices)
    throw HttpError(400, fmt::format("'n' must be between 1 and {}, got {}", kMaxChoices, n), "n");
  c.n = static_cast<int>(n);
  c.stream = get_bool(body, "stream").value_or(false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object())
      throw HttpError(400, "'stream_options' must be an object", "stream_options");
    c.include_usage = get_bool(so, "include_usage").value_or(false);
  }
  int top = -1;
  if (chat) {
    c.logprobs = get_bool(body, "logprobs").value_or(false);
    const int64_t t = get_integer(body, "top_logprobs").value_or(0);
    if (t < 0 || t > kMaxTopLogprobs)
      throw HttpError(400, "'top_logprobs' must be between 0 and 20", "top_logprobs");
    if (t > 0 && !c.logprobs)
      throw HttpError(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (c.logprobs) top = static_cast<int>(t);
    read_tools(body, ordered, c);
  } else if (const auto lp = get_integer(body, "logprobs")) {
    if (*lp < 0 || *lp > kMaxTopLogprobs)
      throw HttpError(400, "'logprobs' must be between 0 and 20", "logprobs");
    c.logprobs = true;
    top = static_cast<int>(*lp);
  }

  // max_completion_tokens is OpenAI's newer name; vLLM takes it on both routes.
  const std::string max_key = body.contains("max_tokens") && !body["max_tokens"].is_null()
                                  ? "max_tokens"
                                  : "max_completion_tokens";
  const auto max_tokens = get_integer(body, max_key);
  if (max_tokens && *max_tokens < 1)
    throw HttpError(400, fmt::format("'{}' must be at least 1, got {}", max_key, *max_tokens),
                    max_key);
  const auto stops = get_stop_strings(body, "stop");
  if (stops.size() > 4) throw HttpError(400, "'stop' holds at most 4 strings", "stop");
  const SamplingParams controls = read_sampling_controls(body, "min_tokens");
  const auto seed = get_integer(body, "seed");
  const bool skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);
  const auto grammar = read_openai_grammar(ctx, ordered);

  std::vector<std::vector<int>> prompts;
  if (chat) {
    const bool offer_tools = !c.tools.is_null() && c.tool_choice != "none";
    const std::string text = chat_prompt_text(ctx, ordered, offer_tools ? c.tools : ordered_json());
    if (offer_tools) {
      c.tool_format = !ctx.options.tool_call_parser.empty() ? ctx.options.tool_call_parser
                                                            : detect_tool_call_format(text);
      if (c.tool_format.empty())
        throw HttpError(400,
                        fmt::format("the chat template shows the model no tool-call format "
                                    "strata knows; start the server with --tool-call-parser "
                                    "({}) if the model uses one",
                                    tool_call_formats()),
                        "tools");
    }
    prompts.push_back(encode_prompt(ctx, text, /*add_special_tokens=*/false, "messages"));
  } else {
    prompts = completion_prompts(ctx, body);
  }
  const int64_t limit = ctx.engine.scheduler().max_request_tokens();
  for (const auto& p : prompts) {
    c.prompt_tokens.push_back(static_cast<int>(p.size()));
    for (int j = 0; j < c.n; ++j) {
      ServeRequest r;
      r.input_ids = p;
      r.sampling = controls;
      // Choice j of a seeded request is seeded seed + j: reproducible, and not n copies.
      r.sampling.seed = seed ? static_cast<uint64_t>(*seed) + j : fresh_seed();
      // Completions default to 16 tokens (OpenAI); chat runs to the end of the context.
      const int64_t fallback =
          chat ? std::max<int64_t>(1, limit - static_cast<int64_t>(p.size())) : 16;
      r.sampling.max_new_tokens =
          static_cast<int>(std::min<int64_t>(max_tokens.value_or(fallback), INT32_MAX));
      r.stop_strings = stops;
      r.skip_special_tokens = skip_special_tokens;
      r.top_logprobs = top;
      r.grammar = grammar;
      c.choices.push_back(std::move(r));
    }
  }
  return c;
}

}  // namespace strata
