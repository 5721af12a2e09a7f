#pragma once
// What the route handlers share: the server's context, waiting on several request streams
// at once, turning token ids into text for a client (stop strings cut, incomplete UTF-8
// held back), and server-sent events.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/engine.h"
#include "server/metrics.h"
#include "server/text_codec.h"

namespace httplib {
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace strata {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 30000;  // 0: any free port
  std::string served_model_name;
  int http_threads = 256;  // connections served at once (each stream holds one)
  size_t max_body_bytes = 10u << 20;
};

struct ServerContext {
  Engine& engine;
  ServerMetrics& metrics;
  const TextCodec* codec;  // null: the model directory has no tokenizer
  ServerOptions options;
};

// Feeds the outputs of `streams` to on_output(stream index, output) as they come, until
// every stream has finished. When on_output returns false (the client went away) the
// unfinished requests are aborted and pump returns false.
bool pump(Engine& engine, const std::vector<std::shared_ptr<RequestStream>>& streams,
          const std::function<bool(size_t, RequestOutput&)>& on_output);

// Text of one choice as tokens arrive: advance() returns the text that may be sent now.
class TextTracker {
 public:
  TextTracker(const TextCodec* codec, std::vector<std::string> stops)
      : codec_(codec), stops_(std::move(stops)) {}
  std::string advance(const std::vector<int>& new_ids, bool finished,
                      const std::string& matched_stop);
  const std::vector<int>& ids() const { return ids_; }

 private:
  const TextCodec* codec_;
  std::vector<std::string> stops_;
  std::vector<int> ids_;
  size_t sent_ = 0;
};

// One SSE event: "data: <payload>\n\n".
bool sse_send(httplib::DataSink& sink, const std::string& payload);
// Streams events produced by `body` (which gets the sink) as text/event-stream.
void respond_sse(httplib::Response& res, std::function<void(httplib::DataSink&)> body);

// A random seed for requests that give none.
uint64_t fresh_seed();
std::string random_id(const std::string& prefix);

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                        bool chat);

}  // namespace strata
