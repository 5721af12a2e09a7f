// Prefix caching for hybrid attention + Mamba2 models through the scheduler, for every hybrid
// family, both --mamba-radix-cache-strategy settings and page sizes 1 and 16: a request that
// shares a prefix with an earlier one resumes from a cached state snapshot and gives the same
// tokens and logits (within 1e-5; Qwen3-Next 5e-5, resume_tolerance) as with the cache off;
// extra_buffer's interval checkpoints make a shared mid-sequence prefix hit where no_buffer's do
// not; every pool is back to empty after a flush, also after retractions under a tiny KV cache and
// a tiny state pool.
#include <gtest/gtest.h>

#include <tuple>

#include "hybrid_cache_setup.h"
#include "runtime/scheduler.h"
#include "runtime/scheduler_test_util.h"
#include "test_util.h"

namespace strata {

namespace {

using test::Finished;
using test::run_all;

constexpr int kTrackInterval = 32;

RunnerOptions hybrid_options(const std::string& strategy, int page, int max_running = 4) {
  return test::hybrid_cache_options(strategy, page, max_running, kTrackInterval);
}

using test::concat;

std::vector<int> tokens(int n, int seed) {
  return test::synthetic_tokens(n, seed);
}

// Once nothing runs, only the cache holds memory; flushing it empties every pool.
void expect_pools_empty_after_flush(Scheduler& s, ModelRunner& runner) {
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.running + st.waiting, 0);
  EXPECT_EQ(st.used_pages, st.cached_pages);
  EXPECT_EQ(st.used_state_slots, st.cached_state_slots);
  EXPECT_TRUE(s.flush_cache());
  EXPECT_EQ(s.stats().used_pages, 0);
  EXPECT_EQ(s.stats().used_state_slots, 0);
  EXPECT_EQ(runner.state_pool()->available(), runner.state_pool()->num_slots());
  EXPECT_EQ(runner.memory().req_to_token().available(),
            runner.memory().req_to_token().max_requests());
}

// How far the logits of a run that resumes from cached states may be from recomputing them:
// the cached states were made by other passes (decode steps, other chunk boundaries), which
// round differently. Qwen3-Next's fixture (a Gated DeltaNet or gated attention and an MoE in
// every layer, logits of std 2.25) measures 2.5e-5 at most; a wrong state is off by ~1e-1.
double resume_tolerance(const std::string& fixture) {
  return fixture == "qwen3_next" ? 5e-5 : 1e-5;
}

void expect_same(const Finished& with, const Finished& without, const std::string& what,
                 double tolerance) {
  EXPECT_EQ(with.ids, without.ids) << what;
  ASSERT_EQ(with.logits.size(), without.logits.size()) << what;
  for (size_t t = 0; t < with.logits.size(); ++t)
    EXPECT_LE(test::max_abs_diff(with.logits[t].data(), without.logits[t].data(),
                                 static_cast<int64_t>(with.logits[t].size())),
              tolerance)
        << what << " token " << t;
}

}  // namespace

class HybridPrefixCache : public test::HybridCacheTest {
 protected:
  // Runs requests one after another on one scheduler; `next` makes each prompt from the
  // answers so far. Checks that the pools end empty.
  std::vector<Finished> in_turn(
      bool disable, int count, int max_new_tokens,
      const std::function<std::vector<int>(const std::vector<Finished>&)>& next,
      SchedulerStats* stats, int chunked_prefill = 8192) {
    ModelRunner runner(ModelConfig::load(test::fixture_dir(fixture())),
                       hybrid_options(strategy(), page()));
    SchedulerOptions o;
    o.disable_radix_cache = disable;
    o.chunked_prefill_size = chunked_prefill;
    Scheduler s(runner, o);
    std::vector<Finished> out;
    for (int i = 0; i < count; ++i) out.push_back(run_all(s, {next(out)}, max_new_tokens).at(0));
    *stats = s.stats();
    expect_pools_empty_after_flush(s, runner);
    return out;
  }
};

// A conversation's next turn extends the previous prompt and answer: it resumes from the
// state where the first request ended (rounded down to a page boundary).
TEST_P(HybridPrefixCache, AFollowUpResumesFromTheFinalStateAndChangesNothing) {
  const std::vector<int> first = tokens(40, 1);
  auto turns = [&](const std::vector<Finished>& done) {
    if (done.empty()) return first;
    return concat(concat(first, done[0].ids), tokens(5, 2));
  };
  SchedulerStats with_stats, without_stats;
  const auto with = in_turn(false, 2, 12, turns, &with_stats);
  const auto without = in_turn(true, 2, 12, turns, &without_stats);
  const int fed = 40 + 12 - 1;  // the last token sampled is never fed to the model
  EXPECT_EQ(with[0].cached_tokens, 0) << name();
  EXPECT_EQ(with[1].cached_tokens, fed / page() * page()) << name();
  EXPECT_EQ(with_stats.cached_prompt_tokens, fed / page() * page()) << name();
  EXPECT_EQ(without_stats.cached_prompt_tokens, 0) << name();
  for (int i = 0; i < 2; ++i)
    expect_same(with[i], without[i], name() + " turn " + std::to_string(i),
                resume_tolerance(fixture()));
}

// Two prompts share their first 60 tokens only. extra_buffer kept a snapshot every 32 prompt
// tokens, so the second resumes at 32; no_buffer kept states only where the first prompt and
// request ended, past the shared part, so the second computes everything.
TEST_P(HybridPrefixCache, AMidSequencePrefixHitsOnlyWithExtraBuffer) {
  const std::vector<int> shared = tokens(60, 3);
  const std::vector<std::vector<int>> prompts{concat(shared, tokens(14, 4)),
                                              concat(shared, tokens(14, 5))};
  auto next = [&](const std::vector<Finished>& done) { return prompts[done.size()]; };
  SchedulerStats st;
  // Chunks of 20 tokens: the interval cuts fall inside them.
  const auto with = in_turn(false, 2, 6, next, &st, 20);
  const auto without = in_turn(true, 2, 6, next, &st, 20);
  EXPECT_EQ(with[1].cached_tokens, strategy() == "extra_buffer" ? kTrackInterval : 0) << name();
  for (int i = 0; i < 2; ++i)
    expect_same(with[i], without[i], name() + " prompt " + std::to_string(i),
                resume_tolerance(fixture()));
}

// Many requests sharing prefixes, a KV cache that holds about two of them and a state pool
// with little room for snapshots: requests are retracted and resumed, snapshots evicted, and
// every request still finishes with the tokens it gets alone; nothing leaks.
TEST_P(HybridPrefixCache, TightMemoryLosesNothingAndLeaksNothing) {
  constexpr int kNewTokens = 16;
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 6; ++k)
    prompts.push_back(concat(tokens(k % 2 ? 40 : 24, k % 3), tokens(3 + k, 10 + k)));
  // Without the cache and with memory to spare: the same for both strategies, so run once.
  static std::map<std::string, std::map<uint64_t, Finished>> roomy_runs;
  const std::string key = fixture() + std::to_string(page());
  if (!roomy_runs.count(key)) {
    ModelRunner runner(ModelConfig::load(test::fixture_dir(fixture())),
                       hybrid_options(strategy(), page(), 6));
    SchedulerOptions o;
    o.disable_radix_cache = true;
    Scheduler s(runner, o);
    roomy_runs[key] = run_all(s, prompts, kNewTokens);
  }
  const auto& roomy = roomy_runs.at(key);

  RunnerOptions ro = hybrid_options(strategy(), page(), 6);
  ro.max_total_tokens = 128;
  ro.max_mamba_cache_size = 8;
  ModelRunner runner(ModelConfig::load(test::fixture_dir(fixture())), ro);
  SchedulerOptions o;
  o.chunked_prefill_size = 24;
  Scheduler s(runner, o);
  const auto tight = run_all(s, prompts, kNewTokens);
  EXPECT_GT(s.stats().retractions, 0) << name();
  expect_pools_empty_after_flush(s, runner);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(tight.at(i).ids.size(), static_cast<size_t>(kNewTokens)) << name() << " " << i;
    EXPECT_EQ(tight.at(i).ids, roomy.at(i).ids) << name() << " request " << i;
  }
}

// A request aborted in the middle of its prefill gives back its pages and state slot; what
// it computed up to a snapshot stays cached until the flush.
TEST_P(HybridPrefixCache, AbortMidPrefillFreesEverything) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir(fixture())),
                     hybrid_options(strategy(), page()));
  SchedulerOptions o;
  o.chunked_prefill_size = 16;
  Scheduler s(runner, o);
  ServeRequest r;
  r.input_ids = tokens(100, 7);
  r.sampling.max_new_tokens = 4;
  s.submit(1, r);
  s.step();
  s.step();
  s.abort(1);
  for (int i = 0; i < 10 && s.has_work(); ++i) s.step();
  EXPECT_FALSE(s.has_work());
  expect_pools_empty_after_flush(s, runner);
}

INSTANTIATE_TEST_SUITE_P(Hybrids, HybridPrefixCache, test::hybrid_cache_setups(),
                         test::hybrid_cache_setup_name);

}  // namespace strata
