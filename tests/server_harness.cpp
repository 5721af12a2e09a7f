#include "server_harness.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <sstream>

#include "grammar/grammar_compiler.h"
#include "test_util.h"

namespace strata::test {

using namespace std::chrono_literals;

std::string tiny_tokenizer_dir() {
  return std::string(STRATA_TEST_DATA) + "/tokenizers/tiny_chatml";
}

json generate_text(const std::string& fixture, const std::string& flag, const std::string& text,
                   int max_new_tokens) {
  std::string out, err;
  const int rc = run_strata("generate --model " + fixture_dir(fixture) + " --tokenizer-path " +
                                tiny_tokenizer_dir() + " " + flag + " '" + text +
                                "' --max-new-tokens " + std::to_string(max_new_tokens) + " --json",
                            &out, &err);
  EXPECT_EQ(rc, 0) << err;
  return json::parse(out, nullptr, false);
}

RunnerOptions harness_runner_options(int64_t max_total_tokens, int max_running) {
  RunnerOptions ro = default_options(1, max_running);
  ro.max_total_tokens = max_total_tokens;
  return ro;
}

Harness::Harness(SchedulerOptions sched, int64_t max_total_tokens, int max_running,
                 const std::string& fixture, const std::string& tokenizer)
    : Harness(fixture, harness_runner_options(max_total_tokens, max_running), sched, tokenizer,
              "llama") {}

Harness::Harness(const std::string& fixture, const RunnerOptions& runner,
                 const SchedulerOptions& sched, const std::string& tokenizer,
                 const std::string& served_name, ServerOptions so)
    : config_(ModelConfig::load(fixture_dir(fixture))) {
  if (!tokenizer.empty()) codec_ = TokenizerCodec::load(tokenizer);
  runner_ = std::make_unique<ModelRunner>(config_, runner);
  scheduler_ = std::make_unique<Scheduler>(*runner_, sched);
  if (codec_) {
    const TokenizerCodec* codec = codec_.get();
    scheduler_->set_detokenizer([codec](bool skip) { return codec->stream(skip); });
    scheduler_->set_retokenizer(
        [codec](const std::string& text) { return codec->encode(text, false); });
  }
  engine_ = std::make_unique<Engine>(*scheduler_, metrics_);
  so.port = 0;
  so.served_model_name = served_name.empty() ? fixture : served_name;
  // Room for the many-stream tests, unless the test sizes the pool itself.
  if (so.http_threads == ServerOptions{}.http_threads) so.http_threads = 300;
  ServerContext ctx{*engine_, metrics_, codec_.get(), so};
  if (codec_)
    ctx.grammars = std::make_shared<grammar::GrammarCompiler>(
        grammar::TokenVocabulary::from_tokenizer(codec_->tokenizer()));
  else
    ctx.grammar_unavailable = "the server has no tokenizer";
  http_ = std::make_unique<HttpServer>(std::move(ctx));
  port_ = http_->bind();
  engine_->start();
  thread_ = std::thread([this] { http_->serve(); });
}

Harness::~Harness() {
  engine_->shutdown();
  http_->stop();
  thread_.join();
}

httplib::Client client_of(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  return c;
}

httplib::Client Harness::client() const {
  return client_of(port_);
}

std::pair<int, json> post_to(int port, const std::string& path, const std::string& body) {
  auto res = client_of(port).Post(path.c_str(), body, "application/json");
  if (!res) return {-1, json()};
  return {res->status, json::parse(res->body, nullptr, false)};
}

std::pair<int, json> Harness::post(const std::string& path, const std::string& body) const {
  return post_to(port_, path, body);
}

std::vector<json> stream_from(int port, const std::string& path, const json& body, bool* done,
                              const std::function<void(const json&)>& on_event) {
  std::vector<json> events;
  std::string buffer;
  *done = false;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
      if (event == "data: [DONE]")
        *done = true;
      else {
        events.push_back(json::parse(event.substr(6)));
        if (on_event) on_event(events.back());
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  EXPECT_TRUE(client_of(port).send(req, res, err)) << httplib::to_string(err);
  EXPECT_EQ(res.status, 200);
  return events;
}

std::vector<json> Harness::stream(const std::string& path, const json& body, bool* done,
                                  const std::function<void(const json&)>& on_event) const {
  return stream_from(port_, path, body, done, on_event);
}

double metric_of(int port, const std::string& name) {
  auto res = client_of(port).Get("/metrics");
  EXPECT_TRUE(res && res->status == 200);
  for (size_t pos = 0; res && pos < res->body.size();) {
    const size_t end = res->body.find('\n', pos);
    const std::string line = res->body.substr(pos, end - pos);
    // "name value" or "name{labels} value"
    if (line.rfind(name, 0) == 0 && line.size() > name.size() &&
        (line[name.size()] == ' ' || line[name.size()] == '{'))
      return std::stod(line.substr(line.rfind(' ') + 1));
    pos = end == std::string::npos ? res->body.size() : end + 1;
  }
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

double Harness::metric(const std::string& name) const {
  return metric_of(port_, name);
}

void Harness::expect_pools_empty() const {
  for (int i = 0;
       i < 400 && (metric("strata:num_running_reqs") > 0 || metric("strata:num_queue_reqs") > 0);
       ++i)
    std::this_thread::sleep_for(25ms);
  EXPECT_EQ(metric("strata:num_running_reqs"), 0);
  EXPECT_EQ(metric("strata:num_queue_reqs"), 0);
  EXPECT_EQ(metric("strata:num_used_tokens"), metric("strata:radix_cache_tokens"));
  EXPECT_EQ(metric("strata:num_used_mamba_slots"), metric("strata:radix_cache_mamba_slots"));
  auto res = client().Post("/flush_cache", "", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(metric("strata:num_used_tokens"), 0);
  EXPECT_EQ(metric("strata:num_used_mamba_slots"), 0);
  EXPECT_EQ(metric("strata:radix_cache_mamba_slots"), 0);
}

ServeProcess::ServeProcess(const std::string& args) {
  log_path_ = (std::filesystem::temp_directory_path() /
               ("strata_serve_" + std::to_string(getpid()) + "_" + std::to_string(std::rand())))
                  .string();
  const std::string command =
      "exec " + std::string(STRATA_BINARY) + " serve " + args + " --port 0 2>" + log_path_;
  pid_ = fork();
  if (pid_ == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

ServeProcess::~ServeProcess() {
  stop();
  std::filesystem::remove(log_path_);
}

int processes_left_with(const std::string& marker, int seconds) {
  int left = 0;
  for (int tries = 0; tries <= seconds * 10; ++tries) {
    left = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string pid = entry.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos ||
          pid == std::to_string(getpid()))
        continue;
      std::ifstream in(entry.path() / "cmdline", std::ios::binary);
      const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
      if (cmdline.find(marker) != std::string::npos) ++left;
    }
    if (left == 0) return 0;
    usleep(100 * 1000);
  }
  return left;
}

json greedy_request(const std::vector<int>& ids, int n, bool stream) {
  return {{"input_ids", ids},
          {"stream", stream},
          {"sampling_params", {{"max_new_tokens", n}, {"temperature", 0}, {"ignore_eos", true}}}};
}

std::vector<std::vector<int>> shared_prefix_prompts(const std::vector<std::vector<int>>& ref) {
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 64; ++i) {
    std::vector<int> p = ref[i % ref.size()];
    for (int k = 0; k < i % 3; ++k) p.push_back((i * 37 + k * 11) % 500 + 1);
    prompts.push_back(p);
  }
  return prompts;
}

std::vector<std::vector<int>> one_process_ids(const std::string& fixture,
                                              const std::vector<std::vector<int>>& prompts) {
  RunnerOptions one = default_options(1, 64);
  one.threads = 1;
  ModelRunner runner(ModelConfig::load(fixture_dir(fixture)), one);
  std::vector<std::vector<int>> ids;
  for (const GenerateOutput& o : greedy(runner, prompts, 6)) ids.push_back(o.output_ids);
  return ids;
}

std::string grid_serve_args(const std::string& fixture, const std::string& grid, bool cache) {
  return "--model " + fixture_dir(fixture) + " " + grid +
         " --threads 1 --pp-timeout 60 --max-running-requests 64 --context-length 256" +
         (cache ? "" : " --disable-radix-cache");
}

void expect_served_ids(int port, const std::vector<std::vector<int>>& prompts,
                       const std::vector<std::vector<int>>& expected, const std::string& log) {
  for (size_t i = 0; i < 3 && i < prompts.size(); ++i)
    EXPECT_EQ(post_to(port, "/generate", greedy_request(prompts[i], 6).dump()).second["output_ids"],
              json(expected[i]))
        << "sequential prompt " << i;
  std::vector<std::future<json>> answers;
  for (size_t i = 0; i < prompts.size(); ++i)
    answers.push_back(std::async(std::launch::async, [&, i] {
      if (i % 2 == 0)
        return post_to(port, "/generate", greedy_request(prompts[i], 6).dump()).second;
      bool done = false;
      const auto events =
          stream_from(port, "/generate", greedy_request(prompts[i], 6, true), &done);
      return done && !events.empty() ? events.back() : json();
    }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json a = answers[i].get();
    EXPECT_TRUE(a.contains("output_ids")) << "prompt " << i << ": " << a.dump() << log;
    if (a.contains("output_ids")) {
      EXPECT_EQ(a["output_ids"], json(expected[i])) << "prompt " << i;
    }
  }
}

void hang_up_after(int port, const json& body, int chunks) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/generate";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int seen = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++seen < chunks; };
  httplib::Response res;
  httplib::Error err;
  client_of(port).send(req, res, err);
}

json idle_server_info(int port) {
  json info;
  for (int i = 0; i < 200; ++i) {
    const auto res = client_of(port).Get("/get_server_info");
    info = res && res->status == 200 ? json::parse(res->body) : json();
    bool idle = info.is_object() && info.contains("pipeline");
    const json stages = idle ? info["pipeline"].value("stages", json::array()) : json::array();
    for (const json& stage : stages)
      idle = idle && stage["num_running_reqs"] == 0 &&
             stage["forward_passes"] == stages[0]["forward_passes"];
    if (idle) break;
    usleep(50 * 1000);
  }
  return info;
}

FaultedServer serve_with_fault(const std::string& args, const std::string& fault,
                               int idle_seconds) {
  setenv("STRATA_PP_FAULT", fault.c_str(), 1);
  // A name no other process has: the job's processes carry it in their command lines.
  const std::string marker = "fault-" + std::to_string(getpid()) + "-" + fault.substr(0, 4);
  ServeProcess serve("--served-model-name " + marker + " " + args + " --pp-timeout 3");
  unsetenv("STRATA_PP_FAULT");
  FaultedServer result;
  const int port = serve.port();
  EXPECT_GT(port, 0) << serve.log();
  if (port > 0) {
    if (idle_seconds > 0) {
      // Idle for longer than --pp-timeout: heartbeats keep the followers waiting.
      sleep(static_cast<unsigned>(idle_seconds));
      EXPECT_EQ(serve.wait_exit(0), -2) << "ended while idle\n" << serve.log();
    }
    const auto answer = post_to(port, "/generate", greedy_request({4, 5, 6}, 4).dump());
    EXPECT_NE(answer.first, 200) << answer.second.dump();
  }
  result.status = serve.wait_exit(60);
  result.processes_left = processes_left_with(marker, 10);
  result.log = serve.log();
  return result;
}

std::string ServeProcess::log() const {
  std::ifstream f(log_path_);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int ServeProcess::port() {
  const std::string marker = "listening on http://127.0.0.1:";
  for (int i = 0; port_ == 0 && pid_ > 0 && i < 6000; ++i) {  // up to 2 minutes
    const std::string text = log();
    const size_t at = text.find(marker);
    if (at != std::string::npos && text.find(' ', at + marker.size()) != std::string::npos) {
      port_ = std::stoi(text.substr(at + marker.size()));
      break;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // ended without listening
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  return port_;
}

httplib::Client ServeProcess::client() {
  return client_of(port());
}

int ServeProcess::wait_exit(int seconds) {
  for (int i = 0; pid_ > 0; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (i >= seconds * 50) return -2;
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

int ServeProcess::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace strata::test
