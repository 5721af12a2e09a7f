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
  if (body.contains("suffix") && !body["suffix"].is_null())
    throw HttpError(400, "'suffix' is not supported", "suffix");
}

// The prompts' token ids, and their texts into `texts`: a text prompt as written, token ids
// decoded (special tokens kept: the text is what the model read; empty without a tokenizer).
std::vector<std::vector<int>> completion_prompts(const ServerContext& ctx, const json& body,
                                                 std::vector<std::string>& texts) {
  if (!body.contains("prompt") || body["prompt"].is_null())
    throw HttpError(400, "'prompt' is required", "prompt");
  const json& p = body["prompt"];
  std::vector<std::vector<int>> prompts;
  auto add = [&](const json& x) {
    if (x.is_string()) {
      texts.push_back(x.get<std::string>());
      prompts.push_back(encode_prompt(ctx, texts.back(), /*add_special_tokens=*/true, "prompt"));
      return;
    }
    prompts.push_back(to_token_ids(x, "prompt"));
    texts.push_back(ctx.codec ? ctx.codec->decode(prompts.back(), false) : "");
  };
  if (p.is_string()) {
    add(p);
    return prompts;
  }
  if (!p.is_array() || p.empty())
    throw HttpError(400,
                    "'prompt' must be a string, a list of token ids, or a non-empty list of those",
                    "prompt");
  if (p[0].is_number()) {
    add(p);
    return prompts;
  }
  for (const auto& x : p) {
    if (!x.is_string() && !x.is_array())
      throw HttpError(400, "'prompt' lists must hold strings or lists of token ids", "prompt");
    add(x);
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
// `tool_choice`. Forcing a call ("required", or a named function) is done with the grammar
// engine, as vLLM does it: the output is constrained to the named tool's parameters schema
// (the answer is that call, the output its arguments), or to a non-empty JSON list of
// {"name", "parameters"} objects of the offered tools (the answer is those calls).
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
  if (c.tool_choice == "function") {
    bool found = false;
    for (const auto& t : tools) found = found || t["function"]["name"] == c.tool_name;
    if (!found)
      throw HttpError(400,
                      fmt::format("'tool_choice' names the function '{}', which 'tools' does not "
                                  "offer",
                                  c.tool_name),
                      "tool_choice");
  }
  if (c.tool_choice == "required" && tools.empty())
    throw HttpError(400, "'tool_choice' \"required\" needs at least one tool in 'tools'",
                    "tool_choice");
  c.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
  if (!tools.empty()) c.tools = ordered["tools"];  // as written, for the template's tojson
}

// The JSON schema a forced tool call's output is constrained to (read_tools).
std::string forced_call_schema(const CompletionRequest& c) {
  auto parameters = [](const ordered_json& tool) {
    const ordered_json& f = tool["function"];
    return f.contains("parameters") && !f["parameters"].is_null()
               ? f["parameters"]
               : ordered_json{{"type", "object"}};
  };
  if (c.tool_choice == "function") {
    for (const auto& t : c.tools)
      if (t["function"]["name"] == c.tool_name) return parameters(t).dump();
  }
  ordered_json any = ordered_json::array();
  for (const auto& t : c.tools)
    any.push_back({{"type", "object"},
                   {"properties",
                    {{"name", {{"const", t["function"]["name"]}}}, {"parameters", parameters(t)}}},
                   {"required", {"name", "parameters"}}});
  ordered_json list = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any}}}};
  if (!c.parallel_tool_calls) list["maxItems"] = 1;  // OpenAI's: at most one call
  return list.dump();
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
  bool continue_final = false;
  if (const auto cfm = body.find("continue_final_message"); cfm != body.end() && !cfm->is_null()) {
    if (!cfm->is_boolean())
      throw HttpError(400, "'continue_final_message' must be true or false",
                      "continue_final_message");
    continue_final = cfm->get<bool>();
  }
  if (const auto agp = body.find("add_generation_prompt"); agp != body.end() && !agp->is_null()) {
    if (!agp->is_boolean())
      throw HttpError(400, "'add_generation_prompt' must be true or false",
                      "add_generation_prompt");
    if (continue_final && agp->get<bool>())
      throw HttpError(400,
                      "'continue_final_message' continues the last message, which "
                      "'add_generation_prompt' would close; set add_generation_prompt false",
                      "add_generation_prompt");
    extra["add_generation_prompt"] = agp->get<bool>();
  }
  if (continue_final) extra["add_generation_prompt"] = false;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      throw HttpError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const auto& [k, v] : body["chat_template_kwargs"].items()) extra[k] = v;
  }
  std::string text = ctx.codec->apply_chat_template(messages, extra);
  if (continue_final) {
    // As transformers does: the prompt ends where the last message's (stripped) content
    // ends, so the model writes on in that message instead of after its end-of-turn marks.
    const ordered_json& last = messages.back()["content"];
    const std::string content = last.is_string() ? last.get<std::string>() : "";
    const size_t a = content.find_first_not_of(" \t\r\n");
    const std::string stripped =
        a == std::string::npos ? ""
                               : content.substr(a, content.find_last_not_of(" \t\r\n") - a + 1);
    const size_t at = stripped.empty() ? std::string::npos : text.rfind(stripped);
    if (at == std::string::npos)
      throw HttpError(400,
                      "'continue_final_message': the last message's content does not appear in "
                      "the rendered prompt (empty, or the template rewrites it)",
                      "continue_final_message");
    text.resize(at + stripped.size());
  }
  return text;
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
  // best_of (legacy completions only, as OpenAI): candidates ranked once all have finished,
  // so not with stream (OpenAI refuses that pair too).
  const int64_t best_of = chat ? n : get_integer(body, "best_of").value_or(n);
  if (best_of < n || best_of > kMaxChoices)
    throw HttpError(
        400,
        fmt::format("'best_of' must be between 'n' ({}) and {}, got {}", n, kMaxChoices, best_of),
        "best_of");
  if (best_of > n && c.stream)
    throw HttpError(400, "'best_of' greater than 'n' cannot be streamed; leave out 'stream'",
                    "best_of");
  c.best_of = static_cast<int>(best_of);
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
  c.echo = !chat && get_bool(body, "echo").value_or(false);

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
  const SamplingParams controls =
      read_sampling_controls(body, "min_tokens", ctx.options.sampling_defaults);
  const auto seed = get_integer(body, "seed");
  auto grammar = read_openai_grammar(ctx, ordered);

  std::vector<std::vector<int>> prompts;
  if (chat) {
    const bool offer_tools = !c.tools.is_null() && c.tool_choice != "none";
    const std::string text = chat_prompt_text(ctx, ordered, offer_tools ? c.tools : ordered_json());
    if (offer_tools && c.tool_choice == "auto") {
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
    const bool forced = c.tool_choice == "required" || c.tool_choice == "function";
    if (forced && offer_tools) {
      if (grammar)
        throw HttpError(400,
                        "'tool_choice' forcing a call constrains the output itself; leave out "
                        "response_format / regex / ebnf, or use tool_choice \"auto\"",
                        "tool_choice");
      grammar = compile_json_schema(ctx, forced_call_schema(c), "tool_choice");
      c.tool_format.clear();  // the calls are read from the constrained JSON (openai_routes)
    }
    c.reasoning_format = ctx.options.reasoning_parser;
    prompts.push_back(encode_prompt(ctx, text, /*add_special_tokens=*/false, "messages"));
  } else {
    prompts = completion_prompts(ctx, body, c.prompt_texts);
  }
  // Formats whose markers are special tokens need them in the text (unless the client said).
  const bool markers_special =
      keeps_special_tokens(c.tool_format) || is_harmony_format(c.reasoning_format);
  const bool skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(!markers_special);
  const int64_t limit = ctx.engine.scheduler().max_request_tokens();
  for (const auto& p : prompts) {
    c.prompt_tokens.push_back(static_cast<int>(p.size()));
    for (int j = 0; j < c.best_of; ++j) {
      ServeRequest r;
      r.input_ids = p;
      r.sampling = controls;
      // Choice j of a seeded request is seeded seed + j: reproducible, and not n copies.
      r.sampling.seed = seed ? static_cast<uint64_t>(*seed) + j : fresh_seed();
      // Completions default to 16 tokens (OpenAI); chat runs to the end of the context.
      const int64_t to_the_end = std::max<int64_t>(1, limit - static_cast<int64_t>(p.size()));
      const int64_t fallback = std::min<int64_t>(
          ctx.options.sampling_defaults.max_new_tokens.value_or(chat ? to_the_end : 16),
          to_the_end);
      r.sampling.max_new_tokens =
          static_cast<int>(std::min<int64_t>(max_tokens.value_or(fallback), INT32_MAX));
      r.stop_strings = stops;
      r.skip_special_tokens = skip_special_tokens;
      // Ranking candidates needs each drawn token's logprob.
      r.top_logprobs = c.best_of > c.n ? std::max(top, 0) : top;
      // echo with logprobs: the prompt's too, from its first token (which has none).
      if (c.echo && c.logprobs) {
        r.prompt_logprobs_from = 0;
        r.prompt_top_logprobs = top;
      }
      r.grammar = grammar;
      c.choices.push_back(std::move(r));
    }
  }
  return c;
}

}  // namespace strata
