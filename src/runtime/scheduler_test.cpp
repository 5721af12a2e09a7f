#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "runtime/scheduler_test_util.h"
#include "test_util.h"

namespace strata {

namespace {

using test::Finished;
using test::run_all;

std::vector<std::vector<int>> shared_prefix_prompts() {
  std::vector<int> prefix;
  for (int i = 0; i < 40; ++i) prefix.push_back((i * 37 + 11) % 500);
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 3; ++k) {
    auto p = prefix;
    for (int i = 0; i <= k * 3; ++i) p.push_back((k * 101 + i * 13) % 500);
    prompts.push_back(p);
  }
  return prompts;
}

}  // namespace

// Dense (GQA), hybrid (Mamba2 + attention) and MLA fixtures through the scheduler: prompts
// chunked, more prompts than rows, decode alone or mixed with prefill.
class SchedulerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerGolden, GreedyOutputsMatchTheReference) {
  const auto ref = test::load_reference(GetParam());
  for (bool mixed : {false, true}) {
    ModelRunner runner(ModelConfig::load(test::fixture_dir(GetParam())),
                       test::default_options(1, 3));
    SchedulerOptions o;
    o.chunked_prefill_size = 16;  // the longest prompt takes several passes
    o.enable_mixed_chunk = mixed;
    Scheduler s(runner, o);
    const auto out = run_all(s, ref.input_ids, 10);  // 4 prompts, 3 rows: one waits
    ASSERT_EQ(out.size(), ref.input_ids.size());
    for (size_t i = 0; i < ref.input_ids.size(); ++i) {
      EXPECT_EQ(out.at(i).ids, ref.greedy_ids[i]) << "prompt " << i << " mixed " << mixed;
      EXPECT_EQ(out.at(i).reason, "length");
    }
    EXPECT_EQ(s.stats().used_pages, s.stats().cached_pages);
  }
}

// Retracted requests resume where they stopped (hybrids from the recurrent-state snapshot the
// prefix cache kept for them, or from their start once it was evicted) and continue exactly.
TEST_P(SchedulerGolden, RetractsUnderMemoryPressureAndLosesNoRequest) {
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 6; ++k) {
    std::vector<int> p;
    for (int i = 0; i < 12 + k; ++i) p.push_back((k * 53 + i * 7) % 500);
    prompts.push_back(p);
  }
  std::map<uint64_t, Finished> roomy, tight;
  int64_t retractions = 0;
  for (int64_t total : {4096, 64}) {
    RunnerOptions ro = test::default_options(1, 6);
    ro.max_total_tokens = total;
    ModelRunner runner(ModelConfig::load(test::fixture_dir(GetParam())), ro);
    Scheduler s(runner, SchedulerOptions{});
    (total == 64 ? tight : roomy) = run_all(s, prompts, 30);
    if (total == 64) retractions = s.stats().retractions;
    EXPECT_EQ(s.stats().used_pages, s.stats().cached_pages);
    EXPECT_EQ(s.stats().used_state_slots, s.stats().cached_state_slots);
    EXPECT_TRUE(s.flush_cache());
    EXPECT_EQ(s.stats().used_pages, 0);
    if (runner.state_pool()) {
      EXPECT_EQ(runner.state_pool()->available(), 6);
    }
  }
  EXPECT_GT(retractions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(tight.at(i).ids.size(), 30u) << "request " << i;
    EXPECT_EQ(tight.at(i).ids, roomy.at(i).ids) << "request " << i;
  }
}

// Several passes in flight (SchedulerOptions::micro_batches, one process: the passes take
// turns): each pass holds at most a third of the requests, a pass's draws are taken once three
// are out, and every request gets the tokens it gets with one pass at a time, also under
// retraction (a KV cache of 64 tokens) and with the prefix cache.
TEST_P(SchedulerGolden, MicroBatchesInFlightGiveTheSameTokens) {
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 6; ++k) {
    std::vector<int> p;
    for (int i = 0; i < 12 + k; ++i) p.push_back((k * 53 + i * 7) % 500);
    prompts.push_back(p);
  }
  const ModelConfig config = ModelConfig::load(test::fixture_dir(GetParam()));
  std::map<uint64_t, Finished> one_at_a_time;
  for (int64_t total : {4096, 4096, 64}) {
    const bool reference = one_at_a_time.empty();
    RunnerOptions ro = test::default_options(1, 6);
    ro.max_total_tokens = total;
    ModelRunner runner(config, ro);
    SchedulerOptions so;
    so.micro_batches = reference ? 1 : 3;
    Scheduler s(runner, so);
    if (!reference) {
      // Three requests, three micro-batches: the first step launches a pass over one of them
      // (admitting only it) and takes nothing yet.
      ServeRequest r;
      r.input_ids = prompts[0];
      r.sampling.max_new_tokens = 1;
      s.submit(100, r);
      s.submit(101, r);
      s.submit(102, r);
      EXPECT_TRUE(s.step().empty());
      EXPECT_EQ(s.stats().passes_in_flight, 1);
      EXPECT_EQ(s.stats().running, 1);
      EXPECT_EQ(s.stats().forward_passes, 1);
      while (s.has_work()) s.step();
    }
    const auto got = run_all(s, prompts, 20);
    if (reference) {
      one_at_a_time = got;
      continue;
    }
    if (total == 64) {
      EXPECT_GT(s.stats().retractions, 0);
    }
    EXPECT_TRUE(s.flush_cache());
    EXPECT_EQ(s.stats().used_pages, 0);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(got.at(i).ids, one_at_a_time.at(i).ids) << "request " << i << ", KV " << total;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SchedulerGolden,
                         ::testing::Values("llama", "nemotron_h", "deepseek_v2_lite"));

// Dense and MLA (the cache shares token slots, whatever a slot holds).
class SchedulerPrefixCache : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerPrefixCache, HitsGiveTheSameTokensAndLogits) {
  const auto prompts = shared_prefix_prompts();
  for (int page : {1, 16}) {
    std::map<uint64_t, Finished> with, without;
    for (bool disable : {false, true}) {
      ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")),
                         test::default_options(page, 4));
      SchedulerOptions o;
      o.disable_radix_cache = disable;
      Scheduler s(runner, o);
      std::map<uint64_t, Finished> all;
      for (size_t i = 0; i < prompts.size(); ++i) {  // one after another: each can reuse the last
        auto one = run_all(s, {prompts[i]}, 6);
        all[i] = one.at(0);
      }
      (disable ? without : with) = all;
      const SchedulerStats st = s.stats();
      if (disable) {
        EXPECT_EQ(st.cached_prompt_tokens, 0);
      } else {
        EXPECT_GE(st.cached_prompt_tokens, 2 * (40 / page) * page) << "page " << page;
      }
      EXPECT_EQ(st.used_pages, st.cached_pages);  // nothing but the cache holds memory
      EXPECT_TRUE(s.flush_cache());
      EXPECT_EQ(s.stats().used_pages, 0);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(with.at(i).ids, without.at(i).ids) << "page " << page << " prompt " << i;
      if (i > 0) {
        EXPECT_GT(with.at(i).cached_tokens, 0);
      }
      ASSERT_EQ(with.at(i).logits.size(), without.at(i).logits.size());
      for (size_t t = 0; t < with.at(i).logits.size(); ++t)
        EXPECT_LE(test::max_abs_diff(with.at(i).logits[t].data(), without.at(i).logits[t].data(),
                                     static_cast<int64_t>(with.at(i).logits[t].size())),
                  1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SchedulerPrefixCache,
                         ::testing::Values("llama", "deepseek_v2_lite"));

TEST(Scheduler, AbortFreesEverythingAndRejectsBadRequests) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), test::default_options(1, 2));
  Scheduler s(runner, SchedulerOptions{});
  ServeRequest r;
  r.input_ids = {1, 2, 3, 4, 5};
  r.sampling.max_new_tokens = 50;
  r.sampling.stop_at_eos = false;
  for (uint64_t id = 0; id < 3; ++id) s.submit(id, r);
  s.step();  // two admitted, one waiting
  s.abort(0);
  s.abort(2);
  std::map<uint64_t, std::string> reasons;
  for (int i = 0; i < 100 && s.has_work(); ++i)
    for (const auto& o : s.step())
      if (o.finished) reasons[o.id] = o.finish_reason;
  EXPECT_EQ(reasons[0], "abort");
  EXPECT_EQ(reasons[1], "length");
  EXPECT_EQ(reasons[2], "abort");
  EXPECT_TRUE(s.flush_cache());
  EXPECT_EQ(s.stats().used_pages, 0);
  EXPECT_EQ(runner.memory().req_to_token().available(), 2);

  ServeRequest bad = r;
  bad.input_ids = {1, 512};
  EXPECT_THROW(s.validate(bad), RequestError);
  bad = r;
  bad.sampling.max_new_tokens = 300;  // context 256
  EXPECT_THROW(s.validate(bad), RequestError);
  bad = r;
  bad.stop_strings = {"x"};  // no tokenizer
  EXPECT_THROW(s.validate(bad), RequestError);
}

// A request aborted while its pass is in flight is freed at once and its draw dropped when the
// pass is taken; the others run on.
TEST(SchedulerMicroBatches, AbortWhileInFlightFreesEverything) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), test::default_options(1, 4));
  SchedulerOptions so;
  so.micro_batches = 2;
  Scheduler s(runner, so);
  ServeRequest r;
  r.input_ids = {1, 2, 3, 4, 5};
  r.sampling.max_new_tokens = 8;
  r.sampling.stop_at_eos = false;
  r.return_logits = true;
  for (uint64_t id = 0; id < 4; ++id) s.submit(id, r);
  EXPECT_TRUE(s.step().empty());  // requests 0 and 1 in flight
  s.abort(0);
  std::map<uint64_t, std::string> reasons;
  std::map<uint64_t, size_t> tokens, logits;
  for (int i = 0; i < 100 && s.has_work(); ++i)
    for (const auto& o : s.step()) {
      tokens[o.id] += o.token_ids.size();
      logits[o.id] += o.logits.size();
      if (o.finished) reasons[o.id] = o.finish_reason;
    }
  EXPECT_EQ(reasons[0], "abort");
  EXPECT_EQ(tokens[0], 0u);
  for (uint64_t id = 1; id < 4; ++id) {
    EXPECT_EQ(reasons[id], "length") << id;
    EXPECT_EQ(tokens[id], 8u) << id;
    EXPECT_EQ(logits[id], 8u) << id;
  }
  EXPECT_TRUE(s.flush_cache());
  EXPECT_EQ(s.stats().used_pages, 0);
  EXPECT_EQ(runner.memory().req_to_token().available(), 4);
}

}  // namespace strata

namespace strata {

// The scheduler applies each request's penalties to its own logits: every greedy token is the
// argmax of the model's logits (return_logits) after the penalties written out here from
// their definitions (Hugging Face's repetition penalty over prompt + output, OpenAI's
// frequency and presence penalties over the output), and the tokens differ from unpenalized
// greedy decoding of the same prompt.
TEST(SchedulerPenalties, GreedyTokensAreTheArgmaxOfThePenalizedLogits) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), test::default_options(1, 4));
  Scheduler s(runner, SchedulerOptions{});
  const std::vector<int> prompt = {5, 9, 5, 9, 5, 17, 33};
  struct Case {
    float repetition, frequency, presence;
  };
  const std::vector<Case> cases = {{1.0f, 0.0f, 0.0f}, {1.8f, 0.0f, 0.0f}, {1.0f, 1.5f, 0.5f}};
  for (size_t i = 0; i < cases.size(); ++i) {
    ServeRequest r;
    r.input_ids = prompt;
    r.sampling.max_new_tokens = 24;
    r.sampling.stop_at_eos = false;
    r.sampling.repetition_penalty = cases[i].repetition;
    r.sampling.frequency_penalty = cases[i].frequency;
    r.sampling.presence_penalty = cases[i].presence;
    r.return_logits = true;
    s.validate(r);
    s.submit(i, r);  // together: one batch, each row its own penalties
  }
  std::map<uint64_t, test::Finished> out;
  for (int steps = 0; s.has_work() && steps < 1000; ++steps)
    for (auto& o : s.step()) {
      auto& f = out[o.id];
      f.ids.insert(f.ids.end(), o.token_ids.begin(), o.token_ids.end());
      for (auto& l : o.logits) f.logits.push_back(std::move(l));
    }
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& f = out.at(i);
    ASSERT_EQ(f.ids.size(), 24u);
    std::vector<int> seen = prompt;
    std::map<int, int> counts;
    for (size_t t = 0; t < f.ids.size(); ++t) {
      std::vector<float> logits = f.logits[t];
      for (size_t v = 0; v < logits.size(); ++v) {
        const int id = static_cast<int>(v);
        if (std::find(seen.begin(), seen.end(), id) != seen.end())
          logits[v] =
              logits[v] > 0 ? logits[v] / cases[i].repetition : logits[v] * cases[i].repetition;
        if (counts.count(id))
          logits[v] -= cases[i].frequency * static_cast<float>(counts[id]) + cases[i].presence;
      }
      const int expected =
          static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(f.ids[t], expected) << "case " << i << " token " << t;
      seen.push_back(f.ids[t]);
      ++counts[f.ids[t]];
    }
  }
  EXPECT_NE(out.at(1).ids, out.at(0).ids);
  EXPECT_NE(out.at(2).ids, out.at(0).ids);
}

// Every request draws on the device that runs the pass (here the CPU reference; CUDA in
// CudaInvariance), with its logit edits, sampling row and logprobs computed there. Replayed
// on the host from the raw logits rows it returns, each token must be the host reference's
// draw (adjust_logits, then sample_token) and each logprob the host's, for requests with
// every control, batched with others that have other controls or none; and the same seed
// must draw the same tokens whether or not the request returns logits.
TEST(SchedulerSampling, DrawsOnTheDeviceEqualTheHostReference) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), test::default_options(1, 4));
  test::expect_draws_equal_host_reference(runner, {3, 14, 15, 92, 65});
}

}  // namespace strata
