#pragma once
// HttpServer: the HTTP front of the engine (cpp-httplib). Routes: SGLang's native
// POST /generate, GET /get_model_info, GET /get_server_info, POST /abort_request; OpenAI's
// POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /v1/models/{id};
// vLLM's POST /tokenize, POST /detokenize; GET /health, GET /health_generate, GET /metrics
// (Prometheus), POST /flush_cache. Before them: CORS and --api-key.
// Errors are OpenAI-style JSON bodies with 4xx codes.
#include <memory>

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
  // Serves until stop(); returns when every connection has finished.
  void serve();
  void stop();

 private:
  void add_routes();
  void add_gates();  // CORS, --api-key, request logs
  ServerContext ctx_;
  std::unique_ptr<httplib::Server> server_;
  int listen_fd_ = -1;
};

}  // namespace strata
