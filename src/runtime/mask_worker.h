#pragma once
// MaskWorker: one thread that runs the scheduler's grammar-mask job of a pass while the
// scheduler thread runs the pass's forward (ModelRunner::forward_sampled with LateMasks), so
// that the masks' host time hides under the forward's device time.
//
// Data-race freedom (the contract both sides keep): start() hands the job over under the
// mutex and wait() takes its end under the same mutex, so everything the scheduler wrote
// before start() happens-before the job, and everything the job wrote happens-before the
// return of wait(). Between the two the scheduler thread touches nothing the job reads or
// writes (the requests' grammar matchers and sampling settings, the mask buffer): it only
// runs the forward, which reads the batch. Matchers of one grammar share its caches, which
// CompiledGrammar serializes with its own mutex (so one worker thread is all it can use when
// every request sends the same schema).
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace strata {

class MaskWorker {
 public:
  MaskWorker();
  ~MaskWorker();  // waits for a job still running
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Runs `job` on the worker thread; the previous job must have been waited for.
  void start(std::function<void()> job);
  // Blocks until the job started last has run (at once when none runs); rethrows what it threw.
  void wait();
  // wait() that drops the job's exception: for paths that are already failing.
  void drain() noexcept;

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void()> job_;
  bool busy_ = false;  // a job was started and has not ended
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace strata
