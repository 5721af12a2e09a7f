// Routes beside generation: vLLM's POST /tokenize and /detokenize, OpenAI's GET /v1/models and
// /v1/models/{id}, SGLang's GET /get_model_info, /get_server_info and POST /abort_request.
#include <httplib.h>

#include "core/error.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "server/request_parsing.h"
#include "server/serving.h"

namespace strata {

namespace {

const TextCodec& need_codec(const ServerContext& ctx, const std::string& field) {
  if (!ctx.codec)
    throw HttpError(400,
                    "this server has no tokenizer (its model directory has no tokenizer.json); "
                    "start it with --tokenizer-path DIR",
                    field);
  return *ctx.codec;
}

json model_card(const ServerContext& ctx) {
  return {{"id", ctx.options.served_model_name},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "strata"},
          {"root", ctx.options.served_model_name},
          {"max_model_len", ctx.engine.scheduler().runner().max_context_len()}};
}

void reply(httplib::Response& res, const json& j) {
  res.set_content(j.dump(), "application/json");
}

}  // namespace

// {"prompt": text} or chat {"messages", "tools", "add_generation_prompt",
// "chat_template_kwargs"}, with "add_special_tokens" (default: true for a prompt, false for
// messages, whose template writes them) -> {"tokens", "count", "max_model_len"}, as vLLM.
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_fields(body,
               {"model", "prompt", "text", "messages", "tools", "add_special_tokens",
                "add_generation_prompt", "chat_template_kwargs", "continue_final_message"},
               "the request");
  const bool chat = body.contains("messages") && !body["messages"].is_null();
  std::vector<int> ids;
  if (chat) {
    const ordered_json ordered = ordered_json::parse(req.body);  // key order kept
    const ordered_json tools = ordered.contains("tools") ? ordered["tools"] : ordered_json();
    if (!tools.is_null() && !tools.is_array())
      throw HttpError(400, "'tools' must be a list", "tools");
    ids = encode_prompt(ctx, chat_prompt_text(ctx, ordered, tools),
                        get_bool(body, "add_special_tokens").value_or(false), "messages");
  } else {
    // "prompt" as vLLM spells it, "text" as SGLang's.
    const std::string key = body.contains("text") ? "text" : "prompt";
    const auto prompt = get_string(body, key);
    if (!prompt) throw HttpError(400, "give 'prompt' (text) or 'messages' (chat)", "prompt");
    ids = encode_prompt(ctx, *prompt, get_bool(body, "add_special_tokens").value_or(true), key);
  }
  reply(res, {{"tokens", ids},
              {"count", ids.size()},
              {"max_model_len", ctx.engine.scheduler().runner().max_context_len()}});
}

// {"tokens": [ids]} -> {"prompt": text} (vLLM's name; "text" too, SGLang's).
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_fields(body, {"model", "tokens", "skip_special_tokens"}, "the request");
  if (!body.contains("tokens"))
    throw HttpError(400, "'tokens' (a list of ids) is required", "tokens");
  const std::vector<int> ids = to_token_ids(body["tokens"], "tokens");
  const int vocab = ctx.engine.scheduler().runner().config().vocab_size;
  for (int id : ids)
    if (id < 0 || id >= vocab)
      throw HttpError(400, fmt::format("token {} is outside the vocabulary (0..{})", id, vocab - 1),
                      "tokens");
  const std::string text =
      need_codec(ctx, "tokens").decode(ids, get_bool(body, "skip_special_tokens").value_or(false));
  reply(res, {{"prompt", text}, {"text", text}});
}

void handle_models(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  reply(res, {{"object", "list"}, {"data", json::array({model_card(ctx)})}});
}

void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
  if (id != ctx.options.served_model_name)
    throw HttpError(404,
                    fmt::format("the model '{}' does not exist; this server serves '{}'", id,
                                ctx.options.served_model_name),
                    "model", "model_not_found");
  reply(res, model_card(ctx));
}

void handle_model_info(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  const ModelConfig& c = ctx.engine.scheduler().runner().config();
  reply(res, {{"model_path", c.model_dir},
              {"served_model_name", ctx.options.served_model_name},
              {"is_generation", true},
              {"vocab_size", c.vocab_size},
              {"max_context_length", ctx.engine.scheduler().runner().max_context_len()},
              {"has_tokenizer", ctx.codec != nullptr}});
}

// The launch configuration (ServerOptions::server_args, from the serve command) and the
// scheduler's state now.
void handle_server_info(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  json info = ctx.options.server_args.is_object() ? ctx.options.server_args : json::object();
  info["served_model_name"] = ctx.options.served_model_name;
  info["context_length"] = ctx.engine.scheduler().runner().max_context_len();
  info["max_request_tokens"] = ctx.engine.scheduler().max_request_tokens();
  const SchedulerStats s = ctx.metrics.scheduler_stats();
  info["internal_states"] = json::array({{{"num_running_reqs", s.running},
                                          {"num_waiting_reqs", s.waiting},
                                          {"total_pages", s.total_pages},
                                          {"used_pages", s.used_pages},
                                          {"cached_pages", s.cached_pages},
                                          {"page_size", s.page_size},
                                          {"new_token_ratio", s.new_token_ratio}}});
  // The pipeline's stages and each one's time blocked on the others (its bubbles).
  json stages = json::array();
  for (size_t k = 0; k < s.stages.size(); ++k)
    stages.push_back({{"stage", k},
                      {"wait_s", s.stages[k].wait_s},
                      {"used_pages", s.stages[k].used_pages},
                      {"used_state_slots", s.stages[k].used_state_slots},
                      {"num_running_reqs", s.stages[k].running},
                      {"forward_passes", s.stages[k].forward_passes}});
  info["pipeline"] = {{"pp_size", std::max<size_t>(1, s.stages.size())},
                      {"micro_batches", s.micro_batches},
                      {"passes_in_flight", s.passes_in_flight},
                      {"stages", stages}};
  info["version"] = "strata";
  reply(res, info);
}

// SGLang's {"rid": id} or {"abort_all": true}: the named requests end with finish_reason
// "abort" (their clients get what was generated so far).
void handle_abort_request(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_fields(body, {"rid", "abort_all"}, "the request");
  const bool all = get_bool(body, "abort_all").value_or(false);
  const auto rid = get_string(body, "rid");
  if (!all && !rid) throw HttpError(400, "give 'rid' (a request id) or 'abort_all': true", "rid");
  const auto ids = ctx.rids->find(rid.value_or(""), all);
  for (uint64_t id : ids) ctx.engine.abort(id);
  reply(res, {{"aborted", ids.size()}});
}

}  // namespace strata
