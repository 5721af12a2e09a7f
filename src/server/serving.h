#pragma once
// What the route handlers share (serving.cpp): the server's context, noticing a client that
// went away, waiting on several request streams at once, turning token ids into text for a
// client (stop strings cut, incomplete UTF-8 held back), encoding prompts, and server-sent
// events.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/engine.h"
#include "server/generation_defaults.h"
#include "server/metrics.h"
#include "server/text_codec.h"

namespace httplib {
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace strata::grammar {
class GrammarCompiler;
}

namespace strata {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 30000;  // 0: any free port
  std::string served_model_name;
  int http_threads = 256;  // connections served at once (each stream holds one)
  size_t max_body_bytes = 10u << 20;
  // --api-key: every route but /health and /health_generate needs "Authorization: Bearer KEY"
  // (empty: open).
  std::string api_key;
  // --allowed-origins: CORS; "*" allows any origin; empty: no CORS headers.
  std::vector<std::string> allowed_origins;
  bool log_requests = false;           // --log-requests: a line per request at info level
  std::string tool_call_parser;        // --tool-call-parser (empty: from the chat template)
  std::string reasoning_parser;        // --reasoning-parser (empty: no reasoning_content)
  json server_args;                    // the launch configuration, for GET /get_server_info
  SamplingDefaults sampling_defaults;  // for the fields a request leaves out
};

// The request ids (SGLang's `rid`) of the requests in flight, for POST /abort_request. A
// Registration names a handler's requests while it serves them.
class RidRegistry {
 public:
  class Registration {
   public:
    Registration(RidRegistry& registry, const std::vector<std::string>& rids,
                 const std::vector<std::shared_ptr<RequestStream>>& streams);
    ~Registration();
    // Forgets the names now (idempotent): once a request's answer has ended, an abort naming
    // it finds nothing, even while the connection that carried it is still being closed.
    void release();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    RidRegistry& registry_;
    std::vector<std::pair<std::string, uint64_t>> entries_;
  };
  // The engine ids of the requests named `rid` (every request with abort_all).
  std::vector<uint64_t> find(const std::string& rid, bool all) const;

 private:
  mutable std::mutex mu_;
  std::multimap<std::string, uint64_t> ids_;
};

struct ServerContext {
  Engine& engine;
  ServerMetrics& metrics;
  const TextCodec* codec;  // null: the model directory has no tokenizer
  ServerOptions options;
  std::shared_ptr<RidRegistry> rids = std::make_shared<RidRegistry>();
  // Structured output (response_format, regex, json_schema, ebnf); null without a tokenizer
  // or with --grammar-backend none, and such requests get a 400 saying which.
  std::shared_ptr<grammar::GrammarCompiler> grammars = nullptr;
  std::string grammar_unavailable = std::string();  // why grammars is null
};

// The connection of the request a handler is serving: whether its client went away.
// cpp-httplib 0.11 hands a handler no connection (req.is_connection_closed() came later), so
// the watch finds its socket by the request's local and remote addresses, which no other
// open connection shares while the handler runs (the handler's thread owns the socket
// until it returns). A client that closes or shuts down its side counts as gone.
class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& req);
  // Call from the handler's thread only, while it serves the request.
  bool client_gone() const;

 private:
  static constexpr int kNotLooked = -2;
  int find_socket() const;
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  mutable int fd_ = kNotLooked;  // -1: not found (then never gone)
};

// Feeds the outputs of `streams` to on_output(stream index, output) as they come, until
// every stream has finished. When on_output returns false or the client is gone (checked
// while waiting, so that a non-streamed request notices too) the unfinished requests are
// aborted and pump returns false.
bool pump(Engine& engine, const std::vector<std::shared_ptr<RequestStream>>& streams,
          const std::function<bool(size_t, RequestOutput&)>& on_output,
          const ConnectionWatch* watch = nullptr);

// Text of one choice as tokens arrive: advance() returns the text that may be sent now. The
// text comes from the codec's incremental decoder; while the request runs, text that could
// still begin a stop string waits, and when a stop string ended it, the text is cut before
// the first stop string (as OpenAI does). Without a codec the text stays empty.
class TextTracker {
 public:
  TextTracker(const TextCodec* codec, std::vector<std::string> stops, bool skip_special_tokens);
  std::string advance(const std::vector<int>& new_ids, bool finished, bool stopped_by_string);
  const std::vector<int>& ids() const { return ids_; }

 private:
  std::unique_ptr<TextStream> stream_;
  std::vector<std::string> stops_;
  std::vector<int> ids_;
  std::string text_;  // decoded so far
  size_t sent_ = 0;
};

// One SSE event: "data: <payload>\n\n".
bool sse_send(httplib::DataSink& sink, const std::string& payload);
// Streams events produced by `body` (which gets the sink) as text/event-stream.
void respond_sse(httplib::Response& res, std::function<void(httplib::DataSink&)> body);

// A random seed for requests that give none.
uint64_t fresh_seed();
std::string random_id(const std::string& prefix);

// Prompt text -> the model's token ids (add_special_tokens: the tokenizer's BOS etc.). A 400
// naming `field` when the server has no tokenizer, or when the tokenizer makes ids the model
// does not have (a tokenizer of another model).
std::vector<int> encode_prompt(const ServerContext& ctx, const std::string& text,
                               bool add_special_tokens, const std::string& field);
// `stop`: a string or a list of strings; empty strings are dropped (they would match always).
std::vector<std::string> get_stop_strings(const json& obj, const std::string& key);
// The answer to a request whose client went away (no one reads it; the log may).
void client_gone(httplib::Response& res);

// Route handlers (generate_route.cpp, openai_routes.cpp, info_routes.cpp); errors are thrown
// as HttpError / RequestError and answered by the server (http_server.cpp).
void handle_generate(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_models(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_model_info(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_server_info(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_abort_request(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                        bool chat);

}  // namespace strata
