// OpenAI-compatible POST /v1/completions and POST /v1/chat/completions, the answer side (the
// request is read by openai_request.cpp): non-streamed answers and server-sent-event streams
// ending in `data: [DONE]`, with logprobs, usage, and tool calls split from the content
// (tool_calls.h). Each choice also carries its `token_ids`.
#include <httplib.h>

#include <algorithm>
#include <ctime>

#include "core/error.h"
#include "server/answer_stream.h"
#include "server/openai_request.h"
#include "server/request_parsing.h"
#include "server/serving.h"
#include "server/tool_call_scan.h"
#include "server/tool_calls.h"

namespace strata {

namespace {

// Without a tokenizer, tokens are named as vLLM's return_tokens_as_token_ids names them.
std::string token_name(const ServerContext& ctx, int id) {
  return ctx.codec ? ctx.codec->token_text(id) : fmt::format("token_id:{}", id);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

// Completions' echo: the prompt tokens before the output's, the first unscored (OpenAI's and
// vLLM's null: nothing predicts it).
struct EchoedPrompt {
  int first_token;
  const std::vector<TokenLogprob>& scored;  // the other prompt tokens
};

// The logprobs of `lps` (after `echo`'s, when given) in the shape of the endpoint: completions'
// parallel lists or chat's list of {token, logprob, bytes, top_logprobs}.
json logprobs_json(const ServerContext& ctx, const std::vector<TokenLogprob>& lps, bool chat,
                   size_t& text_offset, const EchoedPrompt* echo = nullptr) {
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
  auto add = [&](int token, const json& value, const json& top) {
    const std::string name = token_name(ctx, token);
    tokens.push_back(name);
    values.push_back(value);
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += ctx.codec ? name.size() : 0;
  };
  auto add_scored = [&](const TokenLogprob& lp) {
    json top = json::object();
    for (const auto& [id, v] : lp.top) top[token_name(ctx, id)] = v;
    add(lp.token, lp.logprob, top);
  };
  if (echo) {
    add(echo->first_token, nullptr, nullptr);
    for (const auto& lp : echo->scored) add_scored(lp);
  }
  for (const auto& lp : lps) add_scored(lp);
  return {{"tokens", tokens},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

// A prompt counts once however many choices it has (OpenAI's and vLLM's usage), and so do its
// cached tokens: the fewest any of its choices found cached (the choices after the first
// usually find the prompt cached by the first: counting each would report more cached
// tokens than prompt tokens). Every candidate's output counts, also those best_of dropped.
json usage_json(const CompletionRequest& c, const std::vector<int>& completion,
                const std::vector<int>& cached) {
  int64_t prompt = 0, generated = 0, hit = 0;
  const size_t per_prompt = static_cast<size_t>(c.best_of);
  for (size_t k = 0; k < c.choices.size(); ++k) {
    if (k % per_prompt == 0) {
      prompt += c.prompt_tokens[k / per_prompt];
      hit += *std::min_element(cached.begin() + k, cached.begin() + k + per_prompt);
    }
    generated += completion[k];
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", generated},
          {"total_tokens", prompt + generated},
          {"prompt_tokens_details", {{"cached_tokens", hit}}}};
}

// A call a stream has opened: its id, and how many bytes of its arguments went out.
struct StreamedCall {
  std::string id;
  size_t arguments_sent = 0;
};

// Per-choice state while outputs arrive.
struct Choice {
  explicit Choice(TextTracker tracker) : text(std::move(tracker)) {}
  TextTracker text;
  std::string full_text;
  std::vector<TokenLogprob> logprobs, prompt_logprobs;
  size_t text_offset = 0;
  bool echoed = false;  // echo: the prompt went out (streams: with the first chunk)
  std::string finish_reason;
  json matched_stop;
  int completion_tokens = 0, cached_tokens = 0;
  bool role_sent = false;
  // A reasoning or tool-call parser at work: splits reasoning and calls from the content.
  std::shared_ptr<AnswerStream> answer;
  std::vector<StreamedCall> forced;  // a forced call's calls opened so far (streams)
};

bool forced_call(const CompletionRequest& c) {
  return c.chat && !c.tools.is_null() &&
         (c.tool_choice == "required" || c.tool_choice == "function");
}

// Where a forced call's output (tool_choice required or named; the grammar constrains it)
// holds its calls, as far as it has arrived: the named tool's arguments are the whole output
// (trimmed; what has arrived, trimmed, is a prefix of it), the list's calls are its
// {"name", "parameters"} objects, delimited by the scanner the parsers use (tool_call_scan.h).
std::vector<CallSpan> forced_call_spans(const CompletionRequest& c, const std::string& text) {
  std::vector<CallSpan> spans;
  constexpr const char* kSpace = " \t\r\n";
  if (c.tool_choice == "function") {
    const size_t a = text.find_first_not_of(kSpace);
    if (a == std::string::npos) return spans;
    CallSpan s;
    s.name = c.tool_name;
    s.args_begin = a;
    s.args_end = text.find_last_not_of(kSpace) + 1;
    s.args_arrived = s.args_end - a;
    spans.push_back(s);
    return spans;
  }
  size_t i = text.find('[');
  while (i != std::string::npos) {
    i = text.find_first_not_of(" \t\r\n,", i + 1);
    if (i == std::string::npos || text[i] != '{') break;  // the grammar writes objects only
    spans.push_back(scan_call_object(text, i));
    i = spans.back().closed ? spans.back().end - 1 : std::string::npos;
  }
  return spans;
}

// The call deltas a forced call's output so far adds to what `streamed` went out: a call
// opens once its name is whole, then its arguments go out as they arrive.
std::vector<ToolCallDelta> forced_call_deltas(const CompletionRequest& c, const std::string& text,
                                              std::vector<StreamedCall>& streamed) {
  std::vector<ToolCallDelta> out;
  const std::vector<CallSpan> spans = forced_call_spans(c, text);
  for (size_t k = 0; k < spans.size(); ++k) {
    const CallSpan& s = spans[k];
    if (k == streamed.size()) {
      if (!s.name || s.name->empty()) break;
      streamed.push_back({random_id("call_"), 0});
      out.push_back({k, true, streamed[k].id, *s.name, ""});
    }
    StreamedCall& sc = streamed[k];
    if (s.args_begin != std::string::npos && s.args_arrived > sc.arguments_sent) {
      out.push_back(
          {k, false, "", "",
           text.substr(s.args_begin + sc.arguments_sent, s.args_arrived - sc.arguments_sent)});
      sc.arguments_sent = s.args_arrived;
    }
  }
  return out;
}

// A forced call's answer, from the whole constrained output: the named tool's arguments, or
// the list of {"name", "parameters"}. Output that does not parse (cut off by max_tokens)
// stays content. `streamed`: the calls a stream opened, which keep their ids and get only the
// arguments' bytes not sent yet (without it each call goes out whole).
AnswerStream::Parts forced_calls(const CompletionRequest& c, const std::string& text,
                                 const std::vector<StreamedCall>* streamed = nullptr) {
  AnswerStream::Parts out;
  const ordered_json j = ordered_json::parse(text, nullptr, false);
  // Arguments are the model's JSON text, as the parsers give them (tool_calls.h).
  if ((c.tool_choice == "function" && j.is_object()) ||
      (c.tool_choice == "required" && j.is_array()))
    for (const CallSpan& s : forced_call_spans(c, text)) {
      if (!s.name) break;
      if (s.args_begin == std::string::npos)
        out.calls.push_back({random_id("call_"), *s.name, "{}"});
      else if (s.args_end != std::string::npos)
        out.calls.push_back(
            {random_id("call_"), *s.name, text.substr(s.args_begin, s.args_end - s.args_begin)});
    }
  if (out.calls.empty()) out.content = text;
  if (!streamed) {
    out.call_deltas = whole_call_deltas(out.calls);
    return out;
  }
  for (size_t k = 0; k < out.calls.size(); ++k) {
    ToolCall& call = out.calls[k];
    if (k >= streamed->size()) {
      out.call_deltas.push_back({k, true, call.id, call.name, call.arguments});
      continue;
    }
    call.id = (*streamed)[k].id;
    const size_t sent = (*streamed)[k].arguments_sent;
    if (call.arguments.size() > sent)
      out.call_deltas.push_back({k, false, "", "", call.arguments.substr(sent)});
  }
  return out;
}

// A chat choice's message: content (null when only calls came), reasoning_content when a
// reasoning parser is on, tool_calls when there are any.
json chat_message(const CompletionRequest& c, const AnswerStream::Parts& a) {
  json m = {{"role", "assistant"},
            {"content", a.calls.empty() || !a.content.empty() ? json(a.content) : json()}};
  if (!c.reasoning_format.empty())
    m["reasoning_content"] = a.reasoning.empty() ? json() : json(a.reasoning);
  if (!a.calls.empty()) m["tool_calls"] = tool_calls_json(a.calls, false);
  return m;
}

// best_of: the candidates answered, per prompt the n with the highest mean token logprob
// (OpenAI's "highest log probability per token"), in candidate order; all when best_of = n.
std::vector<size_t> answered_choices(const CompletionRequest& c,
                                     const std::vector<Choice>& choices) {
  std::vector<size_t> out;
  const size_t per_prompt = static_cast<size_t>(c.best_of);
  for (size_t first = 0; first < choices.size(); first += per_prompt) {
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t k = first; k < first + per_prompt; ++k) {
      double sum = 0;
      for (const auto& lp : choices[k].logprobs) sum += lp.logprob;
      const size_t len = choices[k].logprobs.size();
      ranked.emplace_back(len ? sum / static_cast<double>(len) : 0.0, k);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<size_t> kept;
    for (int j = 0; j < c.n; ++j) kept.push_back(ranked[j].second);
    std::sort(kept.begin(), kept.end());
    out.insert(out.end(), kept.begin(), kept.end());
  }
  return out;
}

// The finish reason OpenAI gives an answer that called tools.
std::string finish_reason(const std::string& reason, bool called) {
  return called && reason == "stop" ? "tool_calls" : reason;
}

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                        bool chat) {
  const json body = parse_body(req.body);
  auto c = std::make_shared<CompletionRequest>(
      parse_completion_request(ctx, body, ordered_json::parse(req.body), chat));
  for (const auto& r : c->choices) ctx.engine.scheduler().validate(r);  // all, before any runs
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& r : c->choices) streams.push_back(ctx.engine.submit(r));

  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  const auto created = static_cast<int64_t>(std::time(nullptr));
  const std::string object =
      chat ? (c->stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  auto choices = std::make_shared<std::vector<Choice>>();
  for (const auto& r : c->choices) {
    choices->emplace_back(TextTracker(ctx.codec, r.stop_strings, r.skip_special_tokens));
    if (chat && (!c->tool_format.empty() || !c->reasoning_format.empty()))
      choices->back().answer = std::make_shared<AnswerStream>(c->reasoning_format, c->tool_format);
  }
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
          Choice& ch = (*choices)[k];
          ch.logprobs.insert(ch.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
          ch.prompt_logprobs.insert(ch.prompt_logprobs.end(), o.prompt_logprobs.begin(),
                                    o.prompt_logprobs.end());
          return true;
        },
        watch.get());
    if (!whole) return client_gone(res);
    json reply = header();
    reply["choices"] = json::array();
    const std::vector<size_t> answered = answered_choices(*c, *choices);
    for (size_t index = 0; index < answered.size(); ++index) {
      const size_t k = answered[index];
      Choice& ch = (*choices)[k];
      json choice = {
          {"index", index}, {"finish_reason", ch.finish_reason}, {"matched_stop", ch.matched_stop}};
      if (chat && (ch.answer || forced_call(*c))) {
        const AnswerStream::Parts a =
            forced_call(*c)
                ? forced_calls(*c, ch.full_text)
                : AnswerStream::split(c->reasoning_format, c->tool_format, ch.full_text);
        choice["message"] = chat_message(*c, a);
        choice["finish_reason"] = finish_reason(ch.finish_reason, !a.calls.empty());
      } else if (chat)
        choice["message"] = {{"role", "assistant"}, {"content", ch.full_text}};
      else
        choice["text"] =
            (c->echo ? c->prompt_texts[k / static_cast<size_t>(c->best_of)] : "") + ch.full_text;
      choice["token_ids"] = ch.text.ids();
      const EchoedPrompt echo{c->choices[k].input_ids[0], ch.prompt_logprobs};
      choice["logprobs"] = c->logprobs ? logprobs_json(ctx, ch.logprobs, chat, ch.text_offset,
                                                       c->echo ? &echo : nullptr)
                                       : json();
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
          // A chat chunk of this choice with only a delta.
          auto send_delta = [&](const json& delta) {
            json chunk = header();
            chunk["choices"] = json::array({{{"index", k},
                                             {"delta", delta},
                                             {"logprobs", nullptr},
                                             {"finish_reason", nullptr}}});
            return sse_send(sink, chunk.dump());
          };
          // The first chunk of a chat choice names the role.
          if (chat && !ch.role_sent) {
            ch.role_sent = true;
            if (!send_delta({{"role", "assistant"}, {"content", ""}})) return false;
          }
          std::string delta = absorb(k, o);
          json choice = {{"index", k}, {"token_ids", o.token_ids}};
          bool called = false;
          if (chat && (ch.answer || forced_call(*c))) {
            // A forced call streams from the constrained output as it grows; once it is
            // whole, the final parse gives the calls (and what the last text added).
            AnswerStream::Parts a;
            if (forced_call(*c)) {
              std::vector<ToolCallDelta> grown = forced_call_deltas(*c, ch.full_text, ch.forced);
              if (o.finished) a = forced_calls(*c, ch.full_text, &ch.forced);
              a.call_deltas.insert(a.call_deltas.begin(), grown.begin(), grown.end());
            } else {
              a = ch.answer->feed(delta);
              if (o.finished) {
                AnswerStream::Parts rest = ch.answer->finish();
                a.reasoning += rest.reasoning;
                a.content += rest.content;
                a.calls = std::move(rest.calls);
                // What the last text completed: calls read whole, the arguments' last bytes.
                a.call_deltas.insert(a.call_deltas.end(), rest.call_deltas.begin(),
                                     rest.call_deltas.end());
              }
            }
            delta = std::move(a.content);
            if (!a.reasoning.empty() && !send_delta({{"reasoning_content", a.reasoning}}))
              return false;
            called = !a.calls.empty();
            // Each call delta in its own chunk, after the content before the calls: a call
            // opens with its id and name, then its arguments come as they arrive (or whole,
            // for calls read whole); OpenAI's clients join them by index.
            if (!a.call_deltas.empty()) {
              if (!delta.empty() && !send_delta({{"content", delta}})) return false;
              delta.clear();
              for (const ToolCallDelta& d : a.call_deltas)
                if (!send_delta({{"tool_calls", json::array({tool_call_delta_json(d)})}}))
                  return false;
            }
          }
          if (chat)
            choice["delta"] =
                delta.empty() && o.finished ? json::object() : json{{"content", delta}};
          else
            choice["text"] = delta;
          // echo: the prompt opens the choice's first chunk (its logprobs came with it).
          const bool echo_now = c->echo && !ch.echoed;
          if (echo_now) {
            ch.echoed = true;
            choice["text"] = c->prompt_texts[k / static_cast<size_t>(c->best_of)] + delta;
          }
          const EchoedPrompt echo{c->choices[k].input_ids[0], o.prompt_logprobs};
          choice["logprobs"] = c->logprobs ? logprobs_json(ctx, o.logprobs, chat, ch.text_offset,
                                                           echo_now ? &echo : nullptr)
                                           : json();
          choice["finish_reason"] =
              o.finished ? json(finish_reason(ch.finish_reason, called)) : json();
          if (o.finished) choice["matched_stop"] = ch.matched_stop;
          json chunk = header();
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
