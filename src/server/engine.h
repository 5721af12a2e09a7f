#pragma once
// Engine: the scheduler loop on its own thread. HTTP handler threads submit requests and
// wait on a per-request stream; the engine thread is the only one that touches the
// scheduler, the model and the pools.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/scheduler.h"
#include "server/metrics.h"

namespace strata {

// The outputs of one request, in order, as the engine produces them.
class RequestStream {
 public:
  explicit RequestStream(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }
  // Waits up to `timeout` for the next output; false when none came.
  bool next(RequestOutput& out, std::chrono::milliseconds timeout);
  void push(RequestOutput out);

 private:
  uint64_t id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
};

class StepRelay;

class Engine {
 public:
  // `max_in_flight`: requests running or queued at most (0: no limit); beyond it submit()
  // refuses with a 503 that says when to retry. `relay`: the scheduler is one stage of a
  // pipeline (server/pipeline_relay.h): every step's inputs go to the other stages first,
  // heartbeats while idle, and a failed step ends the whole job.
  Engine(Scheduler& scheduler, ServerMetrics& metrics, size_t max_in_flight = 0,
         StepRelay* relay = nullptr);
  ~Engine();
  void start();
  // Aborts every request (each stream gets its "abort" output), then ends the loop.
  void shutdown();

  // Validates (RequestError) and queues a request; a 503 HttpError while shutting down or
  // when max_in_flight requests are already in.
  std::shared_ptr<RequestStream> submit(ServeRequest request);
  void abort(uint64_t id);
  // Runs on the engine thread between steps; false while requests are in flight.
  bool flush_cache();
  const Scheduler& scheduler() const { return scheduler_; }
  bool accepting() const;

 private:
  struct Live {
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point arrival, last_token;
    bool got_first = false;
  };
  void loop();
  // Answers the flush requests taken from flushes_ with `flushed`.
  static void answer_flushes(std::vector<std::shared_ptr<std::promise<bool>>>& flushes,
                             bool flushed);
  void deliver(std::vector<RequestOutput>& outputs);
  void log_batch(const SchedulerStats& stats);
  // The scheduler's stats, with every pipeline stage's last report under a pipeline.
  SchedulerStats current_stats();

  Scheduler& scheduler_;
  ServerMetrics& metrics_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<ServeRequest, std::shared_ptr<RequestStream>>> inbox_;
  std::vector<uint64_t> aborts_;
  // POST /flush_cache callers waiting for the engine thread's answer (one flush serves all).
  std::vector<std::shared_ptr<std::promise<bool>>> flushes_;
  StepRelay* relay_;
  bool stopping_ = false;
  size_t max_in_flight_;
  size_t in_flight_ = 0;  // submitted and not yet finished (under mu_)
  uint64_t next_id_ = 1;
  std::map<uint64_t, Live> live_;  // engine thread only
  SchedulerStats logged_;          // at the last batch log line (engine thread only)
  std::chrono::steady_clock::time_point logged_at_ = std::chrono::steady_clock::now();
};

}  // namespace strata
