// SGLang's native POST /generate: {"text" | "input_ids", "sampling_params", "stream",
// "return_logprob", "top_logprobs_num", "logprob_start_len", "return_text_in_logprobs",
// "rid"}. One prompt answers one object; a batch (`text` a list of strings, `input_ids` a list
// of lists) or sampling_params.n > 1 answers a list, prompt-major (prompt i sample j at
// i * n + j), as SGLang does; streamed, each event is one request's cumulative object, with its
// "index" when there are several. With return_logprob and logprob_start_len, meta_info has
// the prompt's input_token_logprobs and input_top_logprobs (SGLang's).
#include <httplib.h>

#include "core/error.h"
#include "server/grammar_fields.h"
#include "server/request_fields.h"
#include "server/request_parsing.h"
#include "server/serving.h"

namespace strata {

namespace {

constexpr int kMaxChoices = 128;

json finish_reason_json(const RequestOutput& o) {
  json f = {{"type", o.finish_reason}};
  if (o.matched_stop_token >= 0) f["matched"] = o.matched_stop_token;
  if (!o.matched_stop_string.empty()) f["matched"] = o.matched_stop_string;
  return f;
}

struct GenerateRequest {
  std::vector<ServeRequest> requests;  // prompt-major
  std::vector<std::string> rids;       // per request (empty: none given)
  bool batched = false;                // answer a list
  bool stream = false, logprob_text = false;
};

// The prompts: one, or a batch (then `batched`).
std::vector<std::vector<int>> generate_prompts(const ServerContext& ctx, const json& body,
                                               bool& batched) {
  const bool has_text = body.contains("text") && !body["text"].is_null();
  const bool has_ids = body.contains("input_ids") && !body["input_ids"].is_null();
  if (has_text == has_ids) throw HttpError(400, "give exactly one of 'text' and 'input_ids'");
  std::vector<std::vector<int>> prompts;
  if (has_ids) {
    const json& ids = body["input_ids"];
    batched = ids.is_array() && !ids.empty() && ids[0].is_array();
    if (!batched) return {to_token_ids(ids, "input_ids")};
    for (const auto& p : ids) prompts.push_back(to_token_ids(p, "input_ids"));
    return prompts;
  }
  const json& text = body["text"];
  batched = text.is_array();
  if (batched && text.empty()) throw HttpError(400, "'text' is an empty list", "text");
  for (const auto& t : get_string_or_list(body, "text"))
    prompts.push_back(encode_prompt(ctx, t, true, "text"));
  return prompts;
}

ServeRequest read_sampling_params(const json& sp, const json& body,
                                  const SamplingDefaults& defaults) {
  if (!sp.is_object())
    throw HttpError(400, "'sampling_params' must be an object", "sampling_params");
  check_fields(
      sp,
      {"max_new_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids",
       "ignore_eos", "skip_special_tokens", "presence_penalty", "frequency_penalty",
       "repetition_penalty", "min_new_tokens", "logit_bias", "n", "json_schema", "regex", "ebnf"},
      "sampling_params");
  ServeRequest r;
  r.sampling = read_sampling_controls(sp, "min_new_tokens", defaults);
  r.sampling.max_new_tokens = static_cast<int>(std::clamp<int64_t>(
      get_integer(sp, "max_new_tokens").value_or(defaults.max_new_tokens.value_or(128)), -1,
      INT32_MAX));
  if (r.sampling.max_new_tokens < 0)
    throw HttpError(400, "'max_new_tokens' must be >= 0", "max_new_tokens");
  r.stop_strings = get_stop_strings(sp, "stop");
  r.skip_special_tokens = get_bool(sp, "skip_special_tokens").value_or(true);
  if (get_bool(body, "return_logprob").value_or(false)) {
    r.top_logprobs = static_cast<int>(
        std::clamp<int64_t>(get_integer(body, "top_logprobs_num").value_or(0), 0, INT32_MAX));
    // SGLang's logprob_start_len (-1: output logprobs only); the scheduler checks the range.
    r.prompt_logprobs_from = static_cast<int>(std::clamp<int64_t>(
        get_integer(body, "logprob_start_len").value_or(-1), INT32_MIN, INT32_MAX));
    r.prompt_top_logprobs = r.top_logprobs;
  }
  return r;
}

// `ordered`: the same body with its key order (a json_schema object keeps its properties'
// order, which the output follows).
GenerateRequest parse_generate(const ServerContext& ctx, const json& body,
                               const ordered_json& ordered) {
  check_fields(body,
               {"text", "input_ids", "sampling_params", "stream", "return_logprob",
                "top_logprobs_num", "logprob_start_len", "return_text_in_logprobs", "rid"},
               "the request");
  GenerateRequest g;
  g.stream = get_bool(body, "stream").value_or(false);
  g.logprob_text = get_bool(body, "return_text_in_logprobs").value_or(false);
  const auto prompts = generate_prompts(ctx, body, g.batched);
  // sampling_params: one object for all prompts, or a list with one per prompt.
  json sps = body.value("sampling_params", json::object());
  if (sps.is_null()) sps = json::object();
  if (sps.is_array() && sps.size() != prompts.size())
    throw HttpError(400,
                    fmt::format("'sampling_params' is a list of {} but there are {} prompts",
                                sps.size(), prompts.size()),
                    "sampling_params");
  std::vector<std::string> rids;
  if (body.contains("rid") && !body["rid"].is_null()) {
    rids = get_string_or_list(body, "rid");
    if (rids.size() != prompts.size())
      throw HttpError(400,
                      fmt::format("'rid' names {} requests but there are {} prompts", rids.size(),
                                  prompts.size()),
                      "rid");
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& sp = sps.is_array() ? sps[i] : sps;
    ServeRequest base = read_sampling_params(sp, body, ctx.options.sampling_defaults);
    const ordered_json no_params = ordered_json::object();
    const auto sps_ordered = ordered.find("sampling_params");
    const ordered_json& osp = sps_ordered == ordered.end() || sps_ordered->is_null() ? no_params
                              : sps_ordered->is_array() ? (*sps_ordered)[i]
                                                        : *sps_ordered;
    base.grammar = read_generate_grammar(ctx, osp);
    const int64_t n = sp.is_object() ? get_integer(sp, "n").value_or(1) : 1;
    if (n < 1 || n > kMaxChoices)
      throw HttpError(400, fmt::format("'n' must be between 1 and {}, got {}", kMaxChoices, n),
                      "n");
    if (n > 1) g.batched = true;
    const auto seed = sp.is_object() ? get_integer(sp, "seed") : std::nullopt;
    for (int64_t j = 0; j < n; ++j) {
      ServeRequest r = base;
      r.input_ids = prompts[i];
      // Sample j of a seeded prompt is seeded seed + j (as the OpenAI routes do).
      r.sampling.seed = seed ? static_cast<uint64_t>(*seed + j) : fresh_seed();
      g.requests.push_back(std::move(r));
      g.rids.push_back(rids.empty() ? random_id("gen-")
                       : n > 1      ? fmt::format("{}-{}", rids[i], j)
                                    : rids[i]);
    }
  }
  return g;
}

// One request's answer as it grows: {"text", "output_ids", "meta_info"}.
struct Answer {
  TextTracker text;
  json reply;
};

}  // namespace

void handle_generate(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  auto g =
      std::make_shared<GenerateRequest>(parse_generate(ctx, body, ordered_json::parse(req.body)));
  for (const auto& r : g->requests) ctx.engine.scheduler().validate(r);  // all, before any runs
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& r : g->requests) streams.push_back(ctx.engine.submit(r));
  auto registered = std::make_shared<RidRegistry::Registration>(*ctx.rids, g->rids, streams);
  const auto start = std::chrono::steady_clock::now();
  auto answers = std::make_shared<std::vector<Answer>>();
  for (size_t k = 0; k < g->requests.size(); ++k) {
    const ServeRequest& r = g->requests[k];
    answers->push_back({TextTracker(ctx.codec, r.stop_strings, r.skip_special_tokens),
                        {{"output_ids", json::array()}, {"meta_info", {{"id", g->rids[k]}}}}});
    if (ctx.codec) answers->back().reply["text"] = "";
    if (g->batched) answers->back().reply["index"] = k;
  }
  // SGLang's logprob triple: (logprob, token id, token text or null).
  auto triple = [&ctx, g](float logprob, int id) {
    return json::array(
        {logprob, id, g->logprob_text && ctx.codec ? json(ctx.codec->token_text(id)) : json()});
  };
  auto update = [&ctx, g, answers, start, triple](size_t k, RequestOutput& o) -> json& {
    auto& [text, reply] = (*answers)[k];
    for (int id : o.token_ids) reply["output_ids"].push_back(id);
    const std::string delta = text.advance(o.token_ids, o.finished, !o.matched_stop_string.empty());
    if (ctx.codec) reply["text"] = reply["text"].get<std::string>() + delta;
    json& meta = reply["meta_info"];
    meta["prompt_tokens"] = o.prompt_tokens;
    meta["completion_tokens"] = o.completion_tokens;
    meta["cached_tokens"] = o.cached_tokens;
    meta["finish_reason"] = o.finished ? finish_reason_json(o) : json();
    meta["e2e_latency"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ServeRequest& r = g->requests[k];
    if (r.prompt_logprobs_from >= 0 && !meta.contains("input_token_logprobs")) {
      // The prompt tokens from logprob_start_len; the first prompt token has no logprob.
      meta["input_token_logprobs"] = json::array();
      meta["input_top_logprobs"] = json::array();
      if (r.prompt_logprobs_from == 0) {
        json first = triple(0, r.input_ids[0]);
        first[0] = nullptr;
        meta["input_token_logprobs"].push_back(first);
        meta["input_top_logprobs"].push_back(nullptr);
      }
    }
    for (const auto& lp : o.prompt_logprobs) {
      meta["input_token_logprobs"].push_back(triple(lp.logprob, lp.token));
      json top = json::array();
      for (const auto& [id, v] : lp.top) top.push_back(triple(v, id));
      meta["input_top_logprobs"].push_back(top);
    }
    if (r.top_logprobs >= 0) {
      if (!meta.contains("output_token_logprobs")) meta["output_token_logprobs"] = json::array();
      if (!meta.contains("output_top_logprobs")) meta["output_top_logprobs"] = json::array();
      for (const auto& lp : o.logprobs) {
        meta["output_token_logprobs"].push_back(triple(lp.logprob, lp.token));
        json top = json::array();
        for (const auto& [id, v] : lp.top) top.push_back(triple(v, id));
        meta["output_top_logprobs"].push_back(top);
      }
    }
    return reply;
  };
  auto watch = std::make_shared<ConnectionWatch>(req);
  if (!g->stream) {
    const bool whole = pump(
        ctx.engine, streams,
        [&](size_t k, RequestOutput& o) {
          update(k, o);
          return true;
        },
        watch.get());
    registered->release();
    if (!whole) return client_gone(res);
    json out = json::array();
    for (auto& a : *answers) out.push_back(std::move(a.reply));
    res.set_content(g->batched ? out.dump() : out[0].dump(), "application/json");
    return;
  }
  respond_sse(res, [&ctx, streams, update, watch, registered](httplib::DataSink& sink) {
    const bool whole = pump(
        ctx.engine, streams,
        [&](size_t k, RequestOutput& o) {
          // Cumulative, as SGLang streams /generate.
          return sse_send(sink, update(k, o).dump());
        },
        watch.get());
    registered->release();  // before [DONE]: the client may name the rid again at once
    if (whole) sse_send(sink, "[DONE]");
  });
}

}  // namespace strata
