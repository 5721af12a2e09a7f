#pragma once
// An in-process server for end-to-end tests: a fixture's model, the scheduler, the engine and
// the HTTP front on a free loopback port, with the runner and scheduler options a test picks.
// Needs the httplib compile flags (strata_httplib_flags in tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "server/http_server.h"
#include "test_util.h"

namespace strata::test {

class ServerHarness {
 public:
  ServerHarness(const std::string& fixture, const RunnerOptions& runner,
                const SchedulerOptions& sched)
      : config_(ModelConfig::load(fixture_dir(fixture))) {
    runner_ = std::make_unique<ModelRunner>(config_, runner);
    scheduler_ = std::make_unique<Scheduler>(*runner_, sched);
    engine_ = std::make_unique<Engine>(*scheduler_, metrics_);
    ServerOptions so;
    so.port = 0;
    so.served_model_name = fixture;
    so.http_threads = 300;
    http_ = std::make_unique<HttpServer>(ServerContext{*engine_, metrics_, nullptr, so});
    port_ = http_->bind();
    engine_->start();
    thread_ = std::thread([this] { http_->serve(); });
  }
  ~ServerHarness() {
    engine_->shutdown();
    http_->stop();
    thread_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  // POST with a JSON body; returns status and parsed body (null when not JSON).
  std::pair<int, json> post(const std::string& path, const json& body) const {
    auto res = client().Post(path.c_str(), body.dump(), "application/json");
    if (!res) return {-1, json()};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  // One gauge or counter of GET /metrics (-1, and a test failure, when it is missing).
  double metric(const std::string& name) const {
    auto res = client().Get("/metrics");
    EXPECT_TRUE(res && res->status == 200);
    const std::string prefix = name + " ";
    for (size_t pos = 0; res && pos < res->body.size();) {
      const size_t end = res->body.find('\n', pos);
      const std::string line = res->body.substr(pos, end - pos);
      if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
      pos = end == std::string::npos ? res->body.size() : end + 1;
    }
    ADD_FAILURE() << "no metric " << name;
    return -1;
  }
  // Waits (bounded) until nothing runs or waits; then only the prefix cache holds KV slots and
  // recurrent-state slots, and after POST /flush_cache nothing does.
  void expect_pools_empty() const {
    using namespace std::chrono_literals;
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
  ModelRunner& runner() { return *runner_; }

 private:
  ModelConfig config_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  ServerMetrics metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace strata::test
