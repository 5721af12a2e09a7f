#pragma once
// HttpServer: the HTTP front of the engine (cpp-httplib). Routes: SGLang's native
// POST /generate, GET /get_model_info, GET /get_server_info, POST /abort_request; OpenAI's
// POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /v1/models/{id};
// vLLM's POST /tokenize, POST /detokenize; GET /health, GET /health_generate, GET /metrics
// (Prometheus), POST /flush_cache. Before them: CORS and --api-key.
// Errors are OpenAI-style JSON bodies with 4xx codes.
#include <atomic>
#include <memory>
#include <mutex>

#include "server/serving.h"

namespace httplib {
class Server;
}

namespace strata {

class HttpServer {
 public:
  explicit HttpServer(ServerContext ctx);
  ~HttpServer();
  // Fails with Error when host:port cannot be listened on (checked before weights load).
  static void check_can_listen(const std::string& host, int port);
  // Binds host:port (port 0: any free port); returns the port, fails with Error.
  int bind();
  // Serves until stop(); returns when every connection has finished (at once when stop()
  // came first). stop() may be called from any thread, before or while serve() runs.
  void serve();
  void stop();

 private:
  void add_routes();
  void add_gates();  // CORS, --api-key, request logs
  ServerContext ctx_;
  std::unique_ptr<httplib::Server> server_;
  int listen_fd_ = -1;
  // httplib's stop() acts only on a server already in its accept loop: a stop() between
  // serve()'s start and the loop's would be lost and serve() would never return.
  std::mutex serve_mu_;
  bool stopping_ = false, serving_ = false;
  std::atomic<bool> serve_returned_{false};
};

}  // namespace strata
