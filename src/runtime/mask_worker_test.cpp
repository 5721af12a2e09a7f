#include "runtime/mask_worker.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace strata {
namespace {

// Each job's writes are visible after wait() (the contract the scheduler's masks rely on),
// jobs run one after another on the same thread, and a job's exception reaches wait().
TEST(MaskWorker, JobsRunInTurnAndTheirWritesAndErrorsReachWait) {
  MaskWorker worker;
  worker.wait();  // nothing started: returns at once
  std::vector<int> out(1000, 0);
  for (int round = 1; round <= 50; ++round) {
    worker.start([&out, round] {
      for (int& v : out) v += round;
    });
    worker.wait();
    EXPECT_EQ(out[999], round * (round + 1) / 2);
  }
  worker.start([] { throw std::runtime_error("mask job failed"); });
  EXPECT_THROW(worker.wait(), std::runtime_error);
  worker.wait();  // the error was taken
  worker.start([] { throw std::runtime_error("dropped"); });
  worker.drain();
  worker.wait();
}

}  // namespace
}  // namespace strata
