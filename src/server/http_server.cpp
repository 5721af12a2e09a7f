#include "server/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "core/error.h"
#include "server/request_parsing.h"

namespace strata {

using namespace std::chrono_literals;

namespace {

constexpr int kListenBacklog = 1024;

template <typename Fn>
httplib::Server::Handler guarded(Fn fn) {
  return [fn](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const HttpError& e) {
      res.status = e.status;
      res.set_content(error_body(e.status, e.what(), e.type, e.param), "application/json");
    } catch (const RequestError& e) {
      res.status = 400;
      res.set_content(error_body(400, e.what()), "application/json");
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(error_body(500, e.what(), "internal_server_error"), "application/json");
    }
  };
}

json finish_reason_json(const RequestOutput& o) {
  json f = {{"type", o.finish_reason}};
  if (o.matched_stop_token >= 0) f["matched"] = o.matched_stop_token;
  if (!o.matched_stop_string.empty()) f["matched"] = o.matched_stop_string;
  return f;
}

// SGLang's native request: {"input_ids" | "text", "sampling_params": {...}, "stream", ...}.
ServeRequest parse_generate(const ServerContext& ctx, const json& body) {
  reject_unknown_fields(body,
                        {"text", "input_ids", "sampling_params", "stream", "return_logprob",
                         "top_logprobs_num", "return_text_in_logprobs", "rid"},
                        "the request");
  ServeRequest r;
  const bool has_text = body.contains("text") && !body["text"].is_null();
  const bool has_ids = body.contains("input_ids") && !body["input_ids"].is_null();
  if (has_text == has_ids) throw HttpError(400, "give exactly one of 'text' and 'input_ids'");
  if (has_ids) {
    if (body["input_ids"].is_array() && !body["input_ids"].empty() &&
        body["input_ids"][0].is_array())
      throw HttpError(
          400,
          "batched 'input_ids' (a list of lists) are not supported; send one prompt per request",
          "input_ids");
    r.input_ids = to_token_ids(body["input_ids"], "input_ids");
  } else {
    if (body["text"].is_array())
      throw HttpError(
          400, "batched 'text' (a list of strings) is not supported; send one prompt per request",
          "text");
    r.input_ids = encode_prompt(ctx, *get_string(body, "text"), true, "text");
  }
  json sp = body.value("sampling_params", json::object());
  if (sp.is_null()) sp = json::object();
  if (!sp.is_object())
    throw HttpError(400, "'sampling_params' must be an object", "sampling_params");
  reject_unknown_fields(sp,
                        {"max_new_tokens", "temperature", "top_p", "top_k", "seed", "stop",
                         "stop_token_ids", "ignore_eos", "skip_special_tokens"},
                        "sampling_params");
  r.sampling.max_new_tokens = static_cast<int>(
      std::clamp<int64_t>(get_integer(sp, "max_new_tokens").value_or(128), -1, INT32_MAX));
  if (r.sampling.max_new_tokens < 0)
    throw HttpError(400, "'max_new_tokens' must be >= 0", "max_new_tokens");
  r.sampling.temperature = static_cast<float>(get_number(sp, "temperature").value_or(1.0));
  r.sampling.top_p = static_cast<float>(get_number(sp, "top_p").value_or(1.0));
  const int64_t top_k = get_integer(sp, "top_k").value_or(-1);
  r.sampling.top_k = top_k < 0 ? 0 : static_cast<int>(std::min<int64_t>(top_k, INT32_MAX));
  const auto seed = get_integer(sp, "seed");
  r.sampling.seed = seed ? static_cast<uint64_t>(*seed) : fresh_seed();
  r.stop_strings = get_stop_strings(sp, "stop");
  if (sp.contains("stop_token_ids") && !sp["stop_token_ids"].is_null())
    r.sampling.stop_token_ids = to_token_ids(sp["stop_token_ids"], "stop_token_ids");
  r.sampling.stop_at_eos = !get_bool(sp, "ignore_eos").value_or(false);
  r.skip_special_tokens = get_bool(sp, "skip_special_tokens").value_or(true);
  if (get_bool(body, "return_logprob").value_or(false))
    r.top_logprobs = static_cast<int>(
        std::clamp<int64_t>(get_integer(body, "top_logprobs_num").value_or(0), 0, INT32_MAX));
  return r;
}

void handle_generate(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  ServeRequest r = parse_generate(ctx, body);
  const bool stream = get_bool(body, "stream").value_or(false);
  const bool logprob_text = get_bool(body, "return_text_in_logprobs").value_or(false);
  const int top_n = r.top_logprobs;
  auto handle = ctx.engine.submit(r);
  const auto start = std::chrono::steady_clock::now();
  auto state = std::make_shared<std::pair<TextTracker, json>>(
      TextTracker(ctx.codec, r.stop_strings, r.skip_special_tokens), json::object());
  // SGLang's logprob triple: (logprob, token id, token text or null).
  auto triple = [&ctx, logprob_text](float logprob, int id) {
    return json::array(
        {logprob, id, logprob_text && ctx.codec ? json(ctx.codec->token_text(id)) : json()});
  };
  auto update = [&ctx, state, top_n, start, triple](RequestOutput& o) {
    auto& [text, reply] = *state;
    if (!reply.contains("output_ids"))
      reply = {{"output_ids", json::array()}, {"meta_info", json::object()}};
    if (ctx.codec && !reply.contains("text")) reply["text"] = "";
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
    if (top_n >= 0) {
      if (!meta.contains("output_token_logprobs")) meta["output_token_logprobs"] = json::array();
      if (!meta.contains("output_top_logprobs")) meta["output_top_logprobs"] = json::array();
      for (const auto& lp : o.logprobs) {
        meta["output_token_logprobs"].push_back(triple(lp.logprob, lp.token));
        json top = json::array();
        for (const auto& [id, v] : lp.top) top.push_back(triple(v, id));
        meta["output_top_logprobs"].push_back(top);
      }
    }
  };
  auto watch = std::make_shared<ConnectionWatch>(req);
  if (!stream) {
    const bool whole = pump(
        ctx.engine, {handle},
        [&](size_t, RequestOutput& o) {
          update(o);
          return true;
        },
        watch.get());
    if (!whole) return client_gone(res);
    res.set_content(state->second.dump(), "application/json");
    return;
  }
  respond_sse(res, [&ctx, handle, update, state, watch](httplib::DataSink& sink) {
    const bool whole = pump(
        ctx.engine, {handle},
        [&](size_t, RequestOutput& o) {
          update(o);
          return sse_send(sink, state->second.dump());  // cumulative, as SGLang streams /generate
        },
        watch.get());
    if (whole) sse_send(sink, "[DONE]");
  });
}

}  // namespace

HttpServer::HttpServer(ServerContext ctx)
    : ctx_(std::move(ctx)), server_(std::make_unique<httplib::Server>()) {
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error return, not a signal
  const int threads = std::max(4, ctx_.options.http_threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(ctx_.options.max_body_bytes);
  server_->set_keep_alive_timeout(5);
  // httplib listens with a backlog of 5: a burst of connections overflows it and clients see
  // resets. Keep the listening socket so that bind() can raise the backlog (Linux allows a
  // second listen() on a listening socket). Replacing httplib's socket options means setting
  // SO_REUSEADDR here too.
  server_->set_socket_options([this](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = sock;
  });
  add_routes();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::check_can_listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    fail("--host '{}' is not an address this machine can listen on; use e.g. 127.0.0.1 or 0.0.0.0",
         host);
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  const int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const bool ok = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0;
  const int err = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (!ok)
    fail("cannot listen on {}:{}: {}; choose another --port or --host", host, port,
         std::strerror(err));
}

int HttpServer::bind() {
  const int port =
      ctx_.options.port == 0
          ? server_->bind_to_any_port(ctx_.options.host)
          : (server_->bind_to_port(ctx_.options.host, ctx_.options.port) ? ctx_.options.port : -1);
  if (port >= 0 && listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
  if (port < 0)
    fail(
        "cannot listen on {}:{}: the port is taken or the host is not an address of this machine; "
        "choose another --port or --host",
        ctx_.options.host, ctx_.options.port);
  return port;
}

void HttpServer::serve() {
  server_->listen_after_bind();
}

void HttpServer::stop() {
  if (server_) server_->stop();
}

void HttpServer::add_routes() {
  httplib::Server& s = *server_;
  ServerContext& ctx = ctx_;
  const size_t limit_mb = ctx.options.max_body_bytes >> 20;
  s.set_error_handler(httplib::Server::HandlerWithResponse([limit_mb](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
    if (res.status == 404)
      message =
          fmt::format("no route {} {}; see GET /v1/models, POST /generate, POST /v1/completions",
                      req.method, req.path);
    if (res.status == 413)
      message =
          fmt::format("the request body is larger than the server's limit of {} MB", limit_mb);
    if (res.status == 405) message = fmt::format("{} does not accept {}", req.path, req.method);
    res.set_content(error_body(res.status, message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        res.status = 500;
        res.set_content(error_body(500, what, "internal_server_error"), "application/json");
      });

  s.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.status = ctx.engine.accepting() ? 200 : 503;
  });
  s.Get("/health_generate", guarded([&ctx](const httplib::Request&, httplib::Response& res) {
          ServeRequest r;
          r.input_ids = {std::max(0, ctx.engine.scheduler().runner().config().bos_token_id)};
          r.sampling.max_new_tokens = 1;
          bool ok = false;
          pump(ctx.engine, {ctx.engine.submit(r)}, [&](size_t, RequestOutput& o) {
            ok = o.finished && o.finish_reason != "abort";
            return true;
          });
          res.status = ok ? 200 : 503;
        }));
  s.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics.render(), "text/plain; version=0.0.4");
  });
  s.Post("/flush_cache", [&ctx](const httplib::Request&, httplib::Response& res) {
    if (ctx.engine.flush_cache()) {
      res.set_content("Cache flushed.\n", "text/plain");
    } else {
      res.status = 400;
      res.set_content(
          error_body(400, "requests are in flight; flush the cache when the server is idle"),
          "application/json");
    }
  });
  s.Get("/get_model_info", [&ctx](const httplib::Request&, httplib::Response& res) {
    const ModelConfig& c = ctx.engine.scheduler().runner().config();
    res.set_content(json{{"model_path", c.model_dir},
                         {"served_model_name", ctx.options.served_model_name},
                         {"is_generation", true},
                         {"vocab_size", c.vocab_size},
                         {"max_context_length", ctx.engine.scheduler().runner().max_context_len()},
                         {"has_tokenizer", ctx.codec != nullptr}}
                        .dump(),
                    "application/json");
  });
  s.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", ctx.options.served_model_name},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "strata"},
                        {"root", ctx.options.served_model_name},
                        {"max_model_len", ctx.engine.scheduler().runner().max_context_len()}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(),
                    "application/json");
  });
  s.Post("/generate", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
           handle_generate(ctx, req, res);
         }));
  s.Post("/v1/completions", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
           handle_completions(ctx, req, res, false);
         }));
  s.Post("/v1/chat/completions",
         guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
           handle_completions(ctx, req, res, true);
         }));
}

}  // namespace strata
