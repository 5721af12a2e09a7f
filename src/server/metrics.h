#pragma once
// Serving metrics in Prometheus text format (GET /metrics): request and token counters,
// the scheduler's queue and memory gauges, the prefix cache's hit rate, and histograms of
// time to first token, inter-token latency and end-to-end latency. Names follow SGLang's
// (sglang:num_running_reqs -> strata:num_running_reqs, ...).
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/scheduler.h"

namespace strata {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket/_sum/_count lines of metric `name`; `labels`: "" or 'k="v",' (put
  // before `le`).
  void render(const std::string& name, const std::string& help, std::string& out,
              const std::string& labels = "") const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative), + one for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  // Called by the engine thread.
  void on_first_token(double seconds_since_arrival);
  void on_tokens(int n, double seconds_since_previous);  // n tokens after the first, one gap
  void on_finished(const std::string& reason, double e2e_seconds);
  void set_scheduler_stats(const SchedulerStats& s);
  SchedulerStats scheduler_stats() const;
  std::string render() const;
  // The model_name label of every sample (--served-model-name); empty: no label.
  void set_model_name(std::string name) { model_name_ = std::move(name); }

 private:
  mutable std::mutex mu_;
  SchedulerStats stats_;
  Histogram ttft_, itl_, e2e_;
  int64_t finished_ = 0, aborted_ = 0;
  std::string model_name_;
  // (time, generated tokens so far) samples for the throughput gauge over the last seconds
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> throughput_window_;
};

}  // namespace strata
