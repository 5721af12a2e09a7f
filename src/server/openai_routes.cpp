// OpenAI-compatible POST /v1/completions and POST /v1/chat/completions: non-streamed
// answers and server-sent-event streams ending in `data: [DONE]`, with n, max_tokens,
// temperature, top_p, top_k, seed, stop, logprobs / top_logprobs and usage, plus vLLM's and
// SGLang's skip_special_tokens, ignore_eos, stop_token_ids and chat_template_kwargs. Text
// prompts and chat messages go through the server's tokenizer and chat template; prompts
// given as token-id arrays work without one. Each choice also carries its `token_ids`.
#include <httplib.h>

#include <ctime>

#include "core/error.h"
#include "server/request_parsing.h"
#include "server/serving.h"

namespace strata {

namespace {

constexpr int kMaxChoices = 128;
constexpr int kMaxTopLogprobs = 20;

struct CompletionRequest {
  bool chat = false;
  std::vector<ServeRequest> choices;  // prompt-major: choice k = prompt k / n, sample k % n
  std::vector<int> prompt_tokens;     // per prompt
  int n = 1;
  bool stream = false, include_usage = false;
  bool logprobs = false;
};

void reject_unsupported(const json& body) {
  auto nonzero = [&](const char* key) { return get_number(body, key).value_or(0.0) != 0.0; };
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (nonzero(key))
      throw HttpError(400, fmt::format("'{}' is not supported by this server; leave it at 0", key),
                      key);
  if (get_bool(body, "echo").value_or(false))
    throw HttpError(400, "'echo' is not supported by this server", "echo");
  if (get_integer(body, "best_of").value_or(1) != 1)
    throw HttpError(400, "'best_of' other than 1 is not supported", "best_of");
  if (body.contains("suffix") && !body["suffix"].is_null())
    throw HttpError(400, "'suffix' is not supported", "suffix");
  if (body.contains("logit_bias") && !body["logit_bias"].is_null() && !body["logit_bias"].empty())
    throw HttpError(400, "'logit_bias' is not supported by this server", "logit_bias");
  if (body.contains("tools") && !body["tools"].is_null())
    throw HttpError(400, "'tools' are not supported by this server", "tools");
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
json chat_messages(const json& body) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    throw HttpError(400, "'messages' must be a non-empty list of {\"role\", \"content\"} objects",
                    "messages");
  json messages = *it;
  for (auto& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw HttpError(400, "each message must be an object with a string 'role' and its 'content'",
                      "messages");
    json& content = m["content"];
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

std::vector<int> chat_prompt(const ServerContext& ctx, const json& body) {
  const json messages = chat_messages(body);
  if (!ctx.codec)
    throw HttpError(400,
                    "this server has no tokenizer and so no chat template (its model directory "
                    "has no tokenizer.json); start it with --tokenizer-path DIR, or use "
                    "/v1/completions with the prompt as token ids",
                    "messages");
  json extra = json::object();
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    extra = body["chat_template_kwargs"];
    if (!extra.is_object())
      throw HttpError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
  }
  // As transformers' apply_chat_template: the template writes the special tokens itself.
  return encode_prompt(ctx, ctx.codec->apply_chat_template(messages, extra),
                       /*add_special_tokens=*/false, "messages");
}

CompletionRequest parse(const ServerContext& ctx, const json& body, bool chat) {
  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
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
                                               "user",
                                               "logit_bias",
                                               "skip_special_tokens"};
  std::set<std::string> known = common;
  static const std::vector<std::string> chat_only = {
      "messages", "top_logprobs", "max_completion_tokens",
      "tools",    "tool_choice",  "chat_template_kwargs"};
  static const std::vector<std::string> completion_only = {"prompt", "echo", "best_of", "suffix"};
  for (const auto& k : chat ? chat_only : completion_only) known.insert(k);
  reject_unknown_fields(body, known, "the request");
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
  } else if (const auto lp = get_integer(body, "logprobs")) {
    if (*lp < 0 || *lp > kMaxTopLogprobs)
      throw HttpError(400, "'logprobs' must be between 0 and 20", "logprobs");
    c.logprobs = true;
    top = static_cast<int>(*lp);
  }

  auto max_tokens = get_integer(body, "max_tokens");
  if (chat && !max_tokens) max_tokens = get_integer(body, "max_completion_tokens");
  const std::string max_key = body.contains("max_tokens") ? "max_tokens" : "max_completion_tokens";
  if (max_tokens && *max_tokens < 1)
    throw HttpError(400, fmt::format("'{}' must be at least 1, got {}", max_key, *max_tokens),
                    max_key);
  const auto stops = get_stop_strings(body, "stop");
  if (stops.size() > 4) throw HttpError(400, "'stop' holds at most 4 strings", "stop");
  std::vector<int> stop_ids;
  if (body.contains("stop_token_ids") && !body["stop_token_ids"].is_null())
    stop_ids = to_token_ids(body["stop_token_ids"], "stop_token_ids");
  const auto seed = get_integer(body, "seed");
  const int64_t top_k = get_integer(body, "top_k").value_or(-1);
  const bool skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);

  const auto prompts =
      chat ? std::vector<std::vector<int>>{chat_prompt(ctx, body)} : completion_prompts(ctx, body);
  const int64_t limit = ctx.engine.scheduler().max_request_tokens();
  for (const auto& p : prompts) {
    c.prompt_tokens.push_back(static_cast<int>(p.size()));
    for (int j = 0; j < c.n; ++j) {
      ServeRequest r;
      r.input_ids = p;
      r.sampling.temperature = static_cast<float>(get_number(body, "temperature").value_or(1.0));
      r.sampling.top_p = static_cast<float>(get_number(body, "top_p").value_or(1.0));
      r.sampling.top_k = top_k < 0 ? 0 : static_cast<int>(std::min<int64_t>(top_k, INT32_MAX));
      r.sampling.seed = seed ? static_cast<uint64_t>(*seed) + j : fresh_seed();
      // Completions default to 16 tokens (OpenAI); chat runs to the end of the context.
      const int64_t fallback =
          chat ? std::max<int64_t>(1, limit - static_cast<int64_t>(p.size())) : 16;
      r.sampling.max_new_tokens =
          static_cast<int>(std::min<int64_t>(max_tokens.value_or(fallback), INT32_MAX));
      r.sampling.stop_token_ids = stop_ids;
      r.sampling.stop_at_eos = !get_bool(body, "ignore_eos").value_or(false);
      r.stop_strings = stops;
      r.skip_special_tokens = skip_special_tokens;
      r.top_logprobs = top;
      c.choices.push_back(std::move(r));
    }
  }
  return c;
}

// Without a tokenizer, tokens are named as vLLM's return_tokens_as_token_ids names them.
std::string token_name(const ServerContext& ctx, int id) {
  return ctx.codec ? ctx.codec->token_text(id) : fmt::format("token_id:{}", id);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

// The logprobs of `lps` in the shape of the endpoint: completions' parallel lists or chat's
// list of {token, logprob, bytes, top_logprobs}.
json logprobs_json(const ServerContext& ctx, const std::vector<TokenLogprob>& lps, bool chat,
                   size_t& text_offset) {
  if (chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      const std::string name = token_name(ctx, lp.token);
      json top = json::array();
      for (const auto& [id, v] : lp.top) {
        const std::string t = token_name(ctx, id);
        top.push_back({{"token", t}, {"logprob", v}, {"bytes", bytes_of(t)}});
      }
      content.push_back({{"token", name},
                         {"logprob", lp.logprob},
                         {"bytes", bytes_of(name)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (const auto& lp : lps) {
    const std::string name = token_name(ctx, lp.token);
    tokens.push_back(name);
    values.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, v] : lp.top) top[token_name(ctx, id)] = v;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += ctx.codec ? name.size() : 0;
  }
  return {{"tokens", tokens},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json usage_json(const CompletionRequest& c, const std::vector<int>& completion,
                const std::vector<int>& cached) {
  int64_t prompt = 0, generated = 0, hit = 0;
  for (size_t k = 0; k < c.choices.size(); ++k) {
    if (k % c.n == 0) prompt += c.prompt_tokens[k / c.n];
    generated += completion[k];
    hit += cached[k];
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", generated},
          {"total_tokens", prompt + generated},
          {"prompt_tokens_details", {{"cached_tokens", hit}}}};
}

// Per-choice state while outputs arrive.
struct Choice {
  TextTracker text;
  std::string full_text;
  std::vector<TokenLogprob> logprobs;
  size_t text_offset = 0;
  std::string finish_reason;
  json matched_stop;
  int completion_tokens = 0, cached_tokens = 0;
  bool role_sent = false;
};

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                        bool chat) {
  const json body = parse_body(req.body);
  auto c = std::make_shared<CompletionRequest>(parse(ctx, body, chat));
  for (const auto& r : c->choices) ctx.engine.scheduler().validate(r);  // all, before any runs
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& r : c->choices) streams.push_back(ctx.engine.submit(r));

  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  const auto created = static_cast<int64_t>(std::time(nullptr));
  const std::string object =
      chat ? (c->stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  auto choices = std::make_shared<std::vector<Choice>>();
  for (const auto& r : c->choices)
    choices->push_back(Choice{TextTracker(ctx.codec, r.stop_strings, r.skip_special_tokens),
                              {},
                              {},
                              0,
                              {},
                              {},
                              0,
                              0,
                              false});
  auto header = [&ctx, id, created, object]() {
    return json{{"id", id},
                {"object", object},
                {"created", created},
                {"model", ctx.options.served_model_name}};
  };
  // Folds one output into its choice; returns the delta text.
  auto absorb = [choices](size_t k, RequestOutput& o) {
    Choice& ch = (*choices)[k];
    const std::string delta =
        ch.text.advance(o.token_ids, o.finished, !o.matched_stop_string.empty());
    ch.full_text += delta;
    ch.completion_tokens = o.completion_tokens;
    ch.cached_tokens = o.cached_tokens;
    if (o.finished) {
      ch.finish_reason = o.finish_reason;
      if (o.matched_stop_token >= 0) ch.matched_stop = o.matched_stop_token;
      if (!o.matched_stop_string.empty()) ch.matched_stop = o.matched_stop_string;
    }
    return delta;
  };
  auto usage = [c, choices]() {
    std::vector<int> completion, cached;
    for (const auto& ch : *choices) {
      completion.push_back(ch.completion_tokens);
      cached.push_back(ch.cached_tokens);
    }
    return usage_json(*c, completion, cached);
  };

  auto watch = std::make_shared<ConnectionWatch>(req);
  if (!c->stream) {
    const bool whole = pump(
        ctx.engine, streams,
        [&](size_t k, RequestOutput& o) {
          absorb(k, o);
          auto& lps = (*choices)[k].logprobs;
          lps.insert(lps.end(), o.logprobs.begin(), o.logprobs.end());
          return true;
        },
        watch.get());
    if (!whole) return client_gone(res);
    json reply = header();
    reply["choices"] = json::array();
    for (size_t k = 0; k < choices->size(); ++k) {
      Choice& ch = (*choices)[k];
      json choice = {
          {"index", k}, {"finish_reason", ch.finish_reason}, {"matched_stop", ch.matched_stop}};
      if (chat)
        choice["message"] = {{"role", "assistant"}, {"content", ch.full_text}};
      else
        choice["text"] = ch.full_text;
      choice["token_ids"] = ch.text.ids();
      choice["logprobs"] =
          c->logprobs ? logprobs_json(ctx, ch.logprobs, chat, ch.text_offset) : json();
      reply["choices"].push_back(choice);
    }
    reply["usage"] = usage();
    res.set_content(reply.dump(), "application/json");
    return;
  }

  respond_sse(res, [&ctx, c, streams, choices, header, absorb, usage, chat,
                    watch](httplib::DataSink& sink) {
    const bool whole = pump(
        ctx.engine, streams,
        [&](size_t k, RequestOutput& o) {
          Choice& ch = (*choices)[k];
          json chunk = header();
          if (chat && !ch.role_sent) {  // the first chunk of a chat choice names the role
            ch.role_sent = true;
            chunk["choices"] = json::array({{{"index", k},
                                             {"delta", {{"role", "assistant"}, {"content", ""}}},
                                             {"logprobs", nullptr},
                                             {"finish_reason", nullptr}}});
            if (!sse_send(sink, chunk.dump())) return false;
          }
          const std::string delta = absorb(k, o);
          json choice = {{"index", k}, {"token_ids", o.token_ids}};
          if (chat)
            choice["delta"] =
                delta.empty() && o.finished ? json::object() : json{{"content", delta}};
          else
            choice["text"] = delta;
          choice["logprobs"] =
              c->logprobs ? logprobs_json(ctx, o.logprobs, chat, ch.text_offset) : json();
          choice["finish_reason"] = o.finished ? json(ch.finish_reason) : json();
          if (o.finished) choice["matched_stop"] = ch.matched_stop;
          chunk["choices"] = json::array({choice});
          return sse_send(sink, chunk.dump());
        },
        watch.get());
    if (!whole) return;
    if (c->include_usage) {
      json chunk = header();
      chunk["choices"] = json::array();
      chunk["usage"] = usage();
      if (!sse_send(sink, chunk.dump())) return;
    }
    sse_send(sink, "[DONE]");
  });
}

}  // namespace strata
