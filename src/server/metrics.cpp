#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata {

namespace {
// Latency buckets in seconds, as SGLang uses for TTFT/ITL (CPU runs are slower: wider tail).
const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06,
                                             0.08,  0.1,   0.25, 0.5,  0.75, 1.0,
                                             2.5,   5.0,   7.5,  10.0, 20.0, 60.0};
constexpr double kThroughputWindowSeconds = 5.0;

// `labels`: "" or "{model_name=\"...\"}" (SGLang's and vLLM's label, so that dashboards
// built for them select by model).
void gauge(std::string& out, const std::string& labels, const std::string& name,
           const std::string& help, double v) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0}{3} {2}\n", name, help, v, labels);
}
void counter(std::string& out, const std::string& labels, const std::string& name,
             const std::string& help, int64_t v) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0}{3} {2}\n", name, help, v, labels);
}
void seconds_counter(std::string& out, const std::string& labels, const std::string& name,
                     const std::string& help, double seconds) {
  out +=
      fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0}{3} {2}\n", name, help, seconds, labels);
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t b = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[b];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out,
                       const std::string& labels) const {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, labels, bounds_[i], cumulative);
  }
  // _sum and _count carry the labels without the trailing comma.
  const std::string own =
      labels.empty() ? std::string() : "{" + labels.substr(0, labels.size() - 1) + "}";
  out += fmt::format("{0}_bucket{{{1}le=\"+Inf\"}} {2}\n{0}_sum{3} {4}\n{0}_count{3} {2}\n", name,
                     labels, count_, own, sum_);
}

ServerMetrics::ServerMetrics()
    : ttft_(kLatencyBuckets), itl_(kLatencyBuckets), e2e_(kLatencyBuckets) {}

void ServerMetrics::on_first_token(double s) {
  std::lock_guard lk(mu_);
  ttft_.observe(s);
}

void ServerMetrics::on_tokens(int n, double s) {
  std::lock_guard lk(mu_);
  for (int i = 0; i < n; ++i) itl_.observe(s / n);
}

void ServerMetrics::on_finished(const std::string& reason, double e2e) {
  std::lock_guard lk(mu_);
  ++finished_;
  if (reason == "abort") ++aborted_;
  e2e_.observe(e2e);
}

void ServerMetrics::set_scheduler_stats(const SchedulerStats& s) {
  std::lock_guard lk(mu_);
  stats_ = s;
  const auto now = std::chrono::steady_clock::now();
  throughput_window_.emplace_back(now, s.generated_tokens);
  while (throughput_window_.size() > 2 &&
         std::chrono::duration<double>(now - throughput_window_.front().first).count() >
             kThroughputWindowSeconds)
    throughput_window_.pop_front();
}

SchedulerStats ServerMetrics::scheduler_stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

std::string ServerMetrics::render() const {
  std::lock_guard lk(mu_);
  const SchedulerStats& s = stats_;
  std::string out;
  const std::string L = model_name_.empty()
                            ? std::string()
                            : fmt::format("{{model_name=\"{}\"}}", label_value(model_name_));
  const std::string with = model_name_.empty()
                               ? std::string()
                               : fmt::format("model_name=\"{}\",", label_value(model_name_));
  gauge(out, L, "strata:num_running_reqs", "Requests in the running batch.", s.running);
  gauge(out, L, "strata:num_queue_reqs", "Requests waiting in the queue.", s.waiting);
  gauge(out, L, "strata:num_used_tokens", "KV cache slots in use (prefix cache included).",
        static_cast<double>(s.used_pages * s.page_size));
  gauge(out, L, "strata:max_total_num_tokens", "KV cache slots in all.",
        static_cast<double>(s.total_pages * s.page_size));
  gauge(out, L, "strata:token_usage", "Fraction of the KV cache in use (prefix cache included).",
        s.total_pages ? static_cast<double>(s.used_pages) / s.total_pages : 0.0);
  gauge(out, L, "strata:radix_cache_tokens", "KV cache slots held by the prefix cache.",
        static_cast<double>(s.cached_pages * s.page_size));
  gauge(out, L, "strata:max_mamba_slots", "Recurrent-state slots in all (hybrid models; else 0).",
        static_cast<double>(s.state_slots));
  gauge(out, L, "strata:num_used_mamba_slots",
        "Recurrent-state slots in use (prefix cache snapshots included).",
        static_cast<double>(s.used_state_slots));
  gauge(out, L, "strata:radix_cache_mamba_slots",
        "Recurrent-state snapshots held by the prefix cache.",
        static_cast<double>(s.cached_state_slots));
  gauge(out, L, "strata:cache_hit_rate",
        "Prompt tokens served from the prefix cache / prompt tokens.",
        s.prompt_tokens ? static_cast<double>(s.cached_prompt_tokens) / s.prompt_tokens : 0.0);
  double throughput = 0;
  if (throughput_window_.size() >= 2) {
    const auto& [t0, n0] = throughput_window_.front();
    const auto& [t1, n1] = throughput_window_.back();
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    if (dt > 0) throughput = (n1 - n0) / dt;
  }
  gauge(out, L, "strata:gen_throughput", "Generated tokens per second over the last seconds.",
        throughput);
  counter(out, L, "strata:prompt_tokens_total", "Prompt tokens admitted.", s.prompt_tokens);
  counter(out, L, "strata:cached_tokens_total", "Prompt tokens served from the prefix cache.",
          s.cached_prompt_tokens);
  counter(out, L, "strata:generation_tokens_total", "Tokens generated.", s.generated_tokens);
  counter(out, L, "strata:num_requests_total", "Requests finished (aborted included).", finished_);
  counter(out, L, "strata:num_aborted_requests_total", "Requests aborted.", aborted_);
  counter(out, L, "strata:num_retractions_total", "Requests sent back to the queue for memory.",
          s.retractions);
  counter(out, L, "strata:forward_passes_total", "Forward passes run.", s.forward_passes);
  counter(out, L, "strata:jump_forward_tokens_total",
          "Tokens a grammar forced, appended without a draw (--enable-jump-forward).",
          s.jump_forward_tokens);
  seconds_counter(out, L, "strata:grammar_mask_seconds_total", "Host time computing grammar masks.",
                  s.grammar_mask_ms / 1000);
  seconds_counter(out, L, "strata:grammar_mask_exposed_seconds_total",
                  "Of it, the time passes waited for (all of it without overlap).",
                  s.grammar_mask_exposed_ms / 1000);
  gauge(out, L, "strata:pp_size", "Pipeline stages (1: one process).",
        static_cast<double>(std::max<size_t>(1, s.stages.size())));
  gauge(out, L, "strata:micro_batches", "Passes the scheduler keeps in flight at most.",
        s.micro_batches);
  if (!s.stages.empty()) {
    out +=
        "# HELP strata:pipeline_stage_wait_seconds_total Time a pipeline stage spent blocked "
        "on the others (receiving its input or the draws, handing its output over): its "
        "bubbles.\n# TYPE strata:pipeline_stage_wait_seconds_total counter\n";
    for (size_t k = 0; k < s.stages.size(); ++k)
      out += fmt::format("strata:pipeline_stage_wait_seconds_total{{{}stage=\"{}\"}} {}\n", with, k,
                         s.stages[k].wait_s);
  }
  ttft_.render("strata:time_to_first_token_seconds", "Time to first token.", out, with);
  itl_.render("strata:inter_token_latency_seconds", "Time between tokens of a request.", out, with);
  e2e_.render("strata:e2e_request_latency_seconds", "Arrival to last token.", out, with);
  return out;
}

}  // namespace strata
