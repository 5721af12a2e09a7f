#pragma once
// Helpers of the HTTP server tests: an in-process server (model, scheduler, engine and HTTP
// front on a free loopback port, optionally with a tokenizer), and `strata serve` run as a
// child process.
#include <httplib.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/http_server.h"
#include "server/tokenizer_codec.h"

namespace strata::test {

// The tiny byte-level BPE with ChatML tokens made for the 512-id model fixtures
// (tests/data/tokenizers/tiny_chatml, see tests/data/README.md).
std::string tiny_tokenizer_dir();

// `strata generate --json` of a text prompt (flag "--prompt") or a user message ("--chat")
// with the tiny tokenizer, greedy: {"input_ids", "output_ids", "text", ...}; null on failure.
json generate_text(const std::string& fixture, const std::string& flag, const std::string& text,
                   int max_new_tokens);

// The runner options of the first constructor (1 thread, the KV size and running requests).
RunnerOptions harness_runner_options(int64_t max_total_tokens, int max_running);

// A client of the server on loopback `port` that waits as long as a loaded machine needs
// (httplib's default read timeout, 5 s, is short for one).
httplib::Client client_of(int port);
// POST with a JSON body; returns status and parsed body (null when not JSON).
std::pair<int, json> post_to(int port, const std::string& path, const std::string& body);
// A streamed POST: the JSON payload of every `data:` event, and whether [DONE] came last.
// `on_event`, when given, sees each event as it arrives (on the receiving thread).
std::vector<json> stream_from(int port, const std::string& path, const json& body, bool* done,
                              const std::function<void(const json&)>& on_event = {});
// A /metrics value.
double metric_of(int port, const std::string& name);

// How many processes (other than this one) have `marker` in their command line, waiting up to
// `seconds` for the count to reach 0: what a server's stages left running after it ended.
int processes_left_with(const std::string& marker, int seconds);

// The distributed servers' tests (pp_serve_test.cpp, tp_serve_test.cpp):
// A greedy /generate request for `n` tokens past EOS.
json greedy_request(const std::vector<int>& ids, int n, bool stream = false);
// 64 prompts over the reference ones, with 0-2 extra tokens each, so that many share a prefix
// (prefix-cache hits when the cache is on).
std::vector<std::vector<int>> shared_prefix_prompts(const std::vector<std::vector<int>>& ref);
// What one process draws for `prompts` (6 greedy tokens each, all in one batch: the offline
// engine over the same scheduler), and the flags of a server of `fixture` over the process
// grid `grid` (--pp-size / --tp-size) for them: one thread per process, 64 running requests.
std::vector<std::vector<int>> one_process_ids(const std::string& fixture,
                                              const std::vector<std::vector<int>>& prompts);
std::string grid_serve_args(const std::string& fixture, const std::string& grid, bool cache);
// The server at `port` answers `prompts` greedily (6 tokens each) with `expected`: the first 3
// one at a time, then all at once, every other one streamed. `log`: shown on a failure.
void expect_served_ids(int port, const std::vector<std::vector<int>>& prompts,
                       const std::vector<std::vector<int>>& expected, const std::string& log);
// Streams `body` and hangs up after `chunks` chunks (the server then aborts the request).
void hang_up_after(int port, const json& body, int chunks);
// /get_server_info once every stage has reported an idle scheduler after the passes stage 0
// ran (a stage's report is current when it counts as many).
json idle_server_info(int port);
// `strata serve ARGS` (--pp-timeout 3) with STRATA_PP_FAULT=`fault`, one request sent: how it
// ended (exit status, -2 still running after 60 s), its log, and how many of its processes
// were left running.
struct FaultedServer {
  int status = 0;
  int processes_left = 0;
  std::string log;
};
FaultedServer serve_with_fault(const std::string& args, const std::string& fault,
                               int idle_seconds = 0);

class Harness {
 public:
  // `tokenizer`: a directory with tokenizer.json, loaded as `strata serve --tokenizer-path`
  // does; empty: no tokenizer (token ids only).
  explicit Harness(SchedulerOptions sched = {}, int64_t max_total_tokens = 4096,
                   int max_running = 16, const std::string& fixture = "llama",
                   const std::string& tokenizer = "");
  // Any runner options (page size, state-pool slots, ...); served as `served_name` (default:
  // the fixture's name), with any server options (api key, CORS; its port is always 0).
  Harness(const std::string& fixture, const RunnerOptions& runner, const SchedulerOptions& sched,
          const std::string& tokenizer = "", const std::string& served_name = "",
          ServerOptions server = {});
  ~Harness();
  ModelRunner& runner() { return *runner_; }
  const TokenizerCodec* codec() const { return codec_.get(); }
  int port() const { return port_; }
  httplib::Client client() const;
  // POST with a JSON body; returns status and parsed body (null when not JSON).
  std::pair<int, json> post(const std::string& path, const std::string& body) const;
  std::pair<int, json> post(const std::string& path, const json& body) const {
    return post(path, body.dump());
  }
  // A streamed POST: the JSON payload of every `data:` event, and whether [DONE] came last.
  // `on_event`, when given, sees each event as it arrives (on the receiving thread).
  std::vector<json> stream(const std::string& path, const json& body, bool* done,
                           const std::function<void(const json&)>& on_event = {}) const;
  double metric(const std::string& name) const;
  // Waits (bounded) until nothing runs or waits; then only the prefix cache holds KV slots and
  // recurrent-state slots, and after POST /flush_cache nothing does.
  void expect_pools_empty() const;

 private:
  ModelConfig config_;
  std::unique_ptr<TokenizerCodec> codec_;  // outlives the scheduler's text streams
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  ServerMetrics metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

// `strata serve ARGS --port 0` as a child process (stderr to a temporary file).
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args);
  ~ServeProcess();
  // The port from the "listening on" line, waiting for it (bounded); 0 if the child ended or
  // never printed it.
  int port();
  std::string log() const;
  // A client of it that waits as long as the in-process harness's (httplib's default read
  // timeout, 5 s, is short for a loaded machine).
  httplib::Client client();
  // SIGTERM, then the exit status (-1: killed by a signal or not started).
  int stop();
  // Waits up to `seconds` for the process to end by itself: its exit status (-1: killed by a
  // signal or not started), -2 if it still runs.
  int wait_exit(int seconds);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  int port_ = 0;
};

}  // namespace strata::test
