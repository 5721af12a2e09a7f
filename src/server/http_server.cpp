#include "server/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/bounded_server.h"
#include "server/request_parsing.h"

namespace strata {

using namespace std::chrono_literals;

namespace {

// Connections the kernel holds for accept() at least. A burst of more (the soak's 2,000 streams
// at once, the accept thread starved of the CPU) has its SYNs dropped, and a client whose retries
// run out (about 2 minutes) fails to connect: the backlog is at least the HTTP thread count
// (the kernel caps it at net.core.somaxconn).
constexpr int kListenBacklog = 1024;

template <typename Fn>
httplib::Server::Handler guarded(Fn fn) {
  return [fn](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const HttpError& e) {
      res.status = e.status;
      // Refused for now (full, or shutting down): when to come back.
      if (e.status == 503) res.set_header("Retry-After", "1");
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

}  // namespace

HttpServer::HttpServer(ServerContext ctx) : ctx_(std::move(ctx)) {
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error return, not a signal
  ctx_.metrics.set_model_name(ctx_.options.served_model_name);
  const int threads = std::max(4, ctx_.options.http_threads);
  ConnectionLimits limits;
  limits.threads = threads;
  server_ = std::make_unique<BoundedServer>(limits);
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
  add_gates();
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
  if (port >= 0 && listen_fd_ >= 0)
    ::listen(listen_fd_, std::max(kListenBacklog, ctx_.options.http_threads));
  if (port < 0)
    fail(
        "cannot listen on {}:{}: the port is taken or the host is not an address of this machine; "
        "choose another --port or --host",
        ctx_.options.host, ctx_.options.port);
  return port;
}

void HttpServer::serve() {
  {
    std::lock_guard<std::mutex> lock(serve_mu_);
    if (stopping_) return;
    serving_ = true;
  }
  server_->listen_after_bind();
  serve_returned_ = true;
}

void HttpServer::stop() {
  {
    std::lock_guard<std::mutex> lock(serve_mu_);
    stopping_ = true;
    if (!serving_) return;  // serve() has not begun: it will return at once
  }
  // serve() is in listen_after_bind or about to enter its accept loop: wait for the loop (or
  // for serve() to have ended), so that the stop is not lost.
  while (server_ && !server_->is_running() && !serve_returned_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
  using Handle = void (*)(ServerContext&, const httplib::Request&, httplib::Response&);
  auto route = [&ctx](Handle h) {
    return guarded(
        [&ctx, h](const httplib::Request& req, httplib::Response& res) { h(ctx, req, res); });
  };
  s.Get("/v1/models", route(handle_models));
  s.Get(R"(/v1/models/(.+))", route(handle_model));
  s.Get("/get_model_info", route(handle_model_info));
  s.Get("/get_server_info", route(handle_server_info));
  s.Post("/tokenize", route(handle_tokenize));
  s.Post("/detokenize", route(handle_detokenize));
  s.Post("/abort_request", route(handle_abort_request));
}

// Before any route: CORS (a preflight OPTIONS is answered here, as browsers send it without
// credentials) and then --api-key. /health, /health_generate and /metrics stay open, as in
// SGLang, for load balancers and Prometheus.
void HttpServer::add_gates() {
  const ServerOptions& o = ctx_.options;
  server_->set_pre_routing_handler([&o](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    const std::string origin = req.get_header_value("Origin");
    const bool any = std::find(o.allowed_origins.begin(), o.allowed_origins.end(), "*") !=
                     o.allowed_origins.end();
    const bool allowed =
        !origin.empty() && (any || std::find(o.allowed_origins.begin(), o.allowed_origins.end(),
                                             origin) != o.allowed_origins.end());
    if (allowed) {
      res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
      if (!any) res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method")) {
      res.status = allowed ? 204 : 403;
      if (allowed) {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers",
                       asked.empty() ? "Authorization, Content-Type" : asked);
        res.set_header("Access-Control-Max-Age", "600");
      } else {
        res.set_content(error_body(403, fmt::format("the origin '{}' is not allowed; start the "
                                                    "server with --allowed-origins",
                                                    origin)),
                        "application/json");
      }
      return R::Handled;
    }
    if (o.api_key.empty() || req.path == "/health" || req.path == "/health_generate" ||
        req.path == "/metrics")
      return R::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string want = "Bearer " + o.api_key;
    // Compared in time independent of where they differ.
    unsigned diff = auth.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= (i < auth.size() ? auth[i] : 0) ^ want[i];
    if (diff == 0) return R::Unhandled;
    res.status = 401;
    res.set_content(error_body(401,
                               auth.empty() ? "missing API key: send 'Authorization: Bearer KEY'"
                                            : "incorrect API key provided",
                               "invalid_request_error"),
                    "application/json");
    return R::Handled;
  });
  if (o.log_requests || log::enabled(log::Level::debug))
    server_->set_logger([&o](const httplib::Request& req, const httplib::Response& res) {
      constexpr size_t kShown = 2000;
      const std::string body =
          req.body.size() > kShown
              ? req.body.substr(0, kShown) + fmt::format("... ({} bytes)", req.body.size())
              : req.body;
      const log::Level level = o.log_requests ? log::Level::info : log::Level::debug;
      if (log::enabled(level))
        log::write(level,
                   fmt::format("request {} {} -> {} {}", req.method, req.path, res.status, body));
    });
}

}  // namespace strata
