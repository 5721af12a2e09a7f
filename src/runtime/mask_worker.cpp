#include "runtime/mask_worker.h"

#include <utility>

#include "core/error.h"

namespace strata {

MaskWorker::MaskWorker() : thread_([this] { loop(); }) {}

MaskWorker::~MaskWorker() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void MaskWorker::start(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    STRATA_CHECK(!busy_, "a mask job started while the previous one runs");
    job_ = std::move(job);
    busy_ = true;
  }
  wake_.notify_one();
}

void MaskWorker::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void MaskWorker::drain() noexcept {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return !busy_; });
  error_ = nullptr;
}

void MaskWorker::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || job_; });
    if (!job_) return;  // stopping, and idle
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    busy_ = false;
    done_.notify_all();
  }
}

}  // namespace strata
