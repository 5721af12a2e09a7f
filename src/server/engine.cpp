#include "server/engine.h"

#include <cstdio>

#include "core/error.h"
#include "core/log.h"
#include "server/pipeline_relay.h"
#include "server/request_parsing.h"

namespace strata {

bool RequestStream::next(RequestOutput& out, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !queue_.empty(); })) return false;
  out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void RequestStream::push(RequestOutput out) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
}

Engine::Engine(Scheduler& scheduler, ServerMetrics& metrics, size_t max_in_flight, StepRelay* relay)
    : scheduler_(scheduler), metrics_(metrics), relay_(relay), max_in_flight_(max_in_flight) {
  metrics_.set_scheduler_stats(scheduler_.stats());
}

Engine::~Engine() {
  shutdown();
}

void Engine::start() {
  thread_ = std::thread([this] { loop(); });
}

void Engine::shutdown() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Engine::accepting() const {
  std::lock_guard lk(mu_);
  return !stopping_;
}

std::shared_ptr<RequestStream> Engine::submit(ServeRequest request) {
  scheduler_.validate(request);
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard lk(mu_);
    // 503 is what clients and load balancers retry on (elsewhere, or after Retry-After).
    if (stopping_)
      throw HttpError(503, "the server is shutting down; retry on another server", "",
                      "service_unavailable");
    if (max_in_flight_ > 0 && in_flight_ >= max_in_flight_)
      throw HttpError(503,
                      fmt::format("the server is full: {} requests are running or queued (its "
                                  "--max-running-requests + --max-queued-requests); retry later",
                                  in_flight_),
                      "", "service_unavailable");
    ++in_flight_;
    stream = std::make_shared<RequestStream>(next_id_++);
    inbox_.emplace_back(std::move(request), stream);
  }
  cv_.notify_all();
  return stream;
}

void Engine::abort(uint64_t id) {
  {
    std::lock_guard lk(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

bool Engine::flush_cache() {
  auto done = std::make_shared<std::promise<bool>>();
  std::future<bool> result = done->get_future();
  {
    std::lock_guard lk(mu_);
    if (stopping_) return false;
    flushes_.push_back(done);
  }
  cv_.notify_all();
  return result.get();
}

void Engine::answer_flushes(std::vector<std::shared_ptr<std::promise<bool>>>& flushes,
                            bool flushed) {
  for (auto& f : flushes) f->set_value(flushed);
  flushes.clear();
}

void Engine::deliver(std::vector<RequestOutput>& outputs) {
  const auto now = std::chrono::steady_clock::now();
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  for (auto& o : outputs) {
    auto it = live_.find(o.id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    if (!o.token_ids.empty()) {
      if (!l.got_first) {
        metrics_.on_first_token(seconds(now - l.arrival));
        l.got_first = true;
        if (o.token_ids.size() > 1)
          metrics_.on_tokens(static_cast<int>(o.token_ids.size()) - 1, 0.0);
      } else {
        metrics_.on_tokens(static_cast<int>(o.token_ids.size()), seconds(now - l.last_token));
      }
      l.last_token = now;
    }
    const bool finished = o.finished;
    if (finished && o.finish_reason == "abort" && !l.got_first && !accepting()) {
      // Stopped before it produced anything: refused, not aborted, so that the client retries.
      o.finish_reason = "error";
      o.error = "the server is shutting down before this request started; retry on another server";
      o.error_retryable = true;
    }
    if (finished) {
      metrics_.on_finished(o.finish_reason, seconds(now - l.arrival));
      std::lock_guard lk(mu_);
      --in_flight_;
    }
    l.stream->push(std::move(o));
    if (finished) live_.erase(it);
  }
  outputs.clear();
}

SchedulerStats Engine::current_stats() {
  SchedulerStats stats = scheduler_.stats();
  if (relay_) stats.stages = relay_->stages(stats);
  return stats;
}

void Engine::loop() {
  std::vector<RequestOutput> outputs;
  for (;;) {
    std::vector<std::pair<ServeRequest, std::shared_ptr<RequestStream>>> inbox;
    std::vector<std::shared_ptr<std::promise<bool>>> flushes;
    StepInputs inputs;
    bool stopping;
    {
      std::unique_lock lk(mu_);
      auto ready = [&] {
        return stopping_ || !inbox_.empty() || !aborts_.empty() || !flushes_.empty() ||
               scheduler_.has_work();
      };
      if (!relay_) {
        cv_.wait(lk, ready);
      } else if (!cv_.wait_for(lk, std::chrono::milliseconds(relay_->heartbeat_ms()), ready)) {
        lk.unlock();
        try {
          relay_->heartbeat();  // idle: the other stages hear that this one is alive
          metrics_.set_scheduler_stats(current_stats());  // with their last reports
        } catch (const std::exception& e) {
          relay_->fail(e.what());
        }
        continue;
      }
      inbox.swap(inbox_);
      inputs.aborts.swap(aborts_);
      flushes.swap(flushes_);
      stopping = stopping_;
    }
    const auto now = std::chrono::steady_clock::now();
    for (auto& [request, stream] : inbox) {
      live_[stream->id()] = Live{stream, now, now, false};
      inputs.submits.emplace_back(stream->id(), std::move(request));
    }
    if (stopping)
      for (const auto& [id, l] : live_) inputs.aborts.push_back(id);
    inputs.flush_cache = !flushes.empty();
    bool flushed = false;
    try {
      // The other stages first: they take the same inputs and run the same step.
      if (relay_) relay_->before_step(inputs);
      flushed = apply_step_inputs(scheduler_, std::move(inputs));
      if (!flushes.empty()) metrics_.set_scheduler_stats(scheduler_.stats());
      answer_flushes(flushes, flushed);
      outputs = scheduler_.step();
    } catch (const std::exception& e) {
      // Another stage hung or died: the pipeline cannot go on, so the job ends, naming it.
      if (relay_) relay_->fail(e.what());
      // A bug or an exhausted machine: tell every client, then stop serving.
      log::write(log::Level::error, fmt::format("the engine failed: {}", e.what()));
      for (auto& [id, l] : live_) {
        RequestOutput o;
        o.id = id;
        o.finished = true;
        o.finish_reason = "abort";
        l.stream->push(std::move(o));
      }
      live_.clear();
      answer_flushes(flushes, false);
      std::lock_guard lk(mu_);
      stopping_ = true;
      in_flight_ = 0;
      answer_flushes(flushes_, false);
      return;
    }
    const SchedulerStats stats = current_stats();
    metrics_.set_scheduler_stats(stats);  // before clients hear they are done
    log_batch(stats);
    deliver(outputs);
    if (stopping && live_.empty() && !scheduler_.has_work()) {
      std::lock_guard lk(mu_);
      // Flush requests that raced the shutdown (nothing runs: the other stages, stopped next,
      // need not follow).
      if (!flushes_.empty()) answer_flushes(flushes_, scheduler_.flush_cache());
      for (auto& [request, stream] : inbox_) {
        RequestOutput o;
        o.id = stream->id();
        o.finished = true;
        o.finish_reason = "error";
        o.error =
            "the server is shutting down before this request started; retry on another server";
        o.error_retryable = true;
        stream->push(std::move(o));
      }
      inbox_.clear();
      if (relay_) relay_->stop();  // the other stages leave their loops
      return;
    }
  }
}

// SGLang's batch log, at most one line a second while work runs: requests running and queued,
// generation throughput since the last line, prefix-cache hit rate, KV use.
void Engine::log_batch(const SchedulerStats& s) {
  if (!log::enabled(log::Level::info) || s.forward_passes == logged_.forward_passes) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - logged_at_).count();
  if (seconds < 1.0 && s.running + s.waiting > 0) return;
  const int64_t generated = s.generated_tokens - logged_.generated_tokens;
  const int64_t prompt = s.prompt_tokens - logged_.prompt_tokens;
  const int64_t hit = s.cached_prompt_tokens - logged_.cached_prompt_tokens;
  log::info(
      "batch: running {}, queued {}, gen throughput {:.1f} tok/s, prompt tokens {} (cache hit "
      "rate {:.1f}%), KV use {:.1f}% ({} of {} pages, {} cached)",
      s.running, s.waiting, seconds > 0 ? generated / seconds : 0.0, prompt,
      prompt > 0 ? 100.0 * hit / prompt : 0.0,
      s.total_pages > 0 ? 100.0 * s.used_pages / s.total_pages : 0.0, s.used_pages, s.total_pages,
      s.cached_pages);
  logged_ = s;
  logged_at_ = now;
}

}  // namespace strata
