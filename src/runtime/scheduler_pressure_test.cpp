// The scheduler when things go wrong: a RequestError raised inside a step fails that request
// and nothing else, and under a KV cache far too small for the load retraction makes progress
// instead of ping-pong (a retracted request waits for a finish before it is admitted again,
// and the oldest request always keeps running).
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "runtime/scheduler.h"
#include "test_util.h"

namespace strata {

namespace {

ServeRequest greedy_request(std::vector<int> ids, int max_new_tokens) {
  ServeRequest r;
  r.input_ids = std::move(ids);
  r.sampling.max_new_tokens = max_new_tokens;
  r.sampling.stop_at_eos = false;
  return r;
}

struct Outcome {
  std::string reason, error;
  size_t tokens = 0;
  int finished_at_step = -1;
};

std::map<uint64_t, Outcome> run_to_end(Scheduler& s, int max_steps, int* steps_taken) {
  std::map<uint64_t, Outcome> done;
  int step = 0;
  for (; s.has_work() && step < max_steps; ++step)
    for (const auto& o : s.step()) {
      Outcome& d = done[o.id];
      d.tokens += o.token_ids.size();
      if (o.finished) {
        d.reason = o.finish_reason;
        d.error = o.error;
        d.finished_at_step = step;
      }
    }
  *steps_taken = step;
  return done;
}

}  // namespace

TEST(SchedulerErrors, ARequestErrorInAStepFailsThatRequestAndTheRestCarryOn) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), test::default_options(1, 4));
  Scheduler s(runner, SchedulerOptions{});
  // validate() would refuse it (context 256): submitted past it, the request runs until its
  // KV no longer fits the context, where TokenMemory raises a RequestError mid-step.
  s.submit(0, greedy_request({1, 2, 3, 4, 5}, 300));
  s.submit(1, greedy_request({6, 7, 8}, 20));
  int steps = 0;
  auto done = run_to_end(s, 2000, &steps);
  EXPECT_EQ(done[0].reason, "error");
  EXPECT_NE(done[0].error.find("context limit is 256"), std::string::npos) << done[0].error;
  // Every token the context allowed was delivered: 256 positions of KV, and the token drawn
  // from the last of them.
  EXPECT_EQ(done[0].tokens, 256u - 5u + 1u);
  EXPECT_EQ(done[1].reason, "length");
  EXPECT_EQ(done[1].tokens, 20u);
  // Nothing of the failed request is held, and the scheduler serves the next one.
  EXPECT_TRUE(s.flush_cache());
  EXPECT_EQ(s.stats().used_pages, 0);
  EXPECT_EQ(runner.memory().req_to_token().available(), 4);
  s.submit(2, greedy_request({9, 10}, 5));
  done = run_to_end(s, 100, &steps);
  EXPECT_EQ(done[2].reason, "length");
  EXPECT_EQ(done[2].tokens, 5u);
}

TEST(SchedulerPressure, RetractionUnderATinyKVCacheMakesProgressWithoutPingPong) {
  // 12 requests of 16 + 100 tokens over 256 KV slots: two fit at a time.
  RunnerOptions o = test::default_options(1, 12);
  o.max_total_tokens = 256;
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), o);
  Scheduler s(runner, SchedulerOptions{});
  constexpr int kRequests = 12, kNew = 100;
  for (uint64_t id = 0; id < kRequests; ++id) {
    std::vector<int> prompt;
    for (int i = 0; i < 16; ++i) prompt.push_back(static_cast<int>((id * 31 + i * 7) % 500));
    ServeRequest r = greedy_request(prompt, kNew);
    s.validate(r);
    s.submit(id, r);
  }
  int steps = 0;
  const auto done = run_to_end(s, 20000, &steps);
  ASSERT_EQ(done.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, d] : done) {
    EXPECT_EQ(d.reason, "length") << "request " << id;
    EXPECT_EQ(d.tokens, static_cast<size_t>(kNew)) << "request " << id;
  }
  const SchedulerStats stats = s.stats();
  // Each retraction sends a request back until a finish frees memory: at most one per finish.
  EXPECT_LE(stats.retractions, kRequests) << "steps " << steps;
  // The oldest request is never the one retracted: it finishes first.
  int first_step = INT32_MAX;
  for (const auto& [id, d] : done) first_step = std::min(first_step, d.finished_at_step);
  EXPECT_EQ(done.at(0).finished_at_step, first_step);
  std::printf("12 requests over 256 KV slots: %d steps, %lld forward passes, %lld retractions\n",
              steps, static_cast<long long>(stats.forward_passes),
              static_cast<long long>(stats.retractions));
}

}  // namespace strata
