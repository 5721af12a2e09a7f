#pragma once
// Helpers shared by the scheduler tests: run prompts to completion and collect each
// request's tokens, logits and usage.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/scheduler.h"

namespace strata::test {

struct Finished {
  std::vector<int> ids;
  std::vector<std::vector<float>> logits;
  std::string reason;
  int cached_tokens = 0;
};

// Submits every prompt at once (ids 0, 1, ...) and steps the scheduler until all are done
// (bounded).
inline std::map<uint64_t, Finished> run_all(Scheduler& s,
                                            const std::vector<std::vector<int>>& prompts,
                                            int max_new_tokens) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    ServeRequest r;
    r.input_ids = prompts[i];
    r.sampling.max_new_tokens = max_new_tokens;
    r.sampling.stop_at_eos = false;
    r.return_logits = true;
    s.validate(r);
    s.submit(i, r);
  }
  std::map<uint64_t, Finished> done;
  for (int steps = 0; s.has_work() && steps < 10000; ++steps) {
    for (auto& o : s.step()) {
      Finished& f = done[o.id];
      f.ids.insert(f.ids.end(), o.token_ids.begin(), o.token_ids.end());
      for (auto& l : o.logits) f.logits.push_back(std::move(l));
      if (o.finished) {
        f.reason = o.finish_reason;
        f.cached_tokens = o.cached_tokens;
      }
    }
  }
  EXPECT_FALSE(s.has_work());
  return done;
}

// Requests with every sampling control (and with none) batched on `runner`, each drawing on
// the runner's device; replayed on the host from the raw logits rows they return, each token
// must be the host reference's draw (adjust_logits, then sample_token) and each logprob the
// host's; a stop token stays banned until min_new_tokens; the same seed draws the same tokens
// whether or not the request returns logits.
inline void expect_draws_equal_host_reference(ModelRunner& runner, const std::vector<int>& prompt) {
  const int vocab = runner.config().vocab_size;
  SamplingParams rich;
  rich.max_new_tokens = 20;
  rich.stop_at_eos = false;
  rich.temperature = 1.2f;
  rich.top_k = 40;
  rich.top_p = 0.9f;
  rich.min_p = 0.01f;
  rich.repetition_penalty = 1.3f;
  rich.frequency_penalty = 0.7f;
  rich.presence_penalty = 0.4f;
  rich.logit_bias = {{11, 3.0f}, {12, -2.0f}};
  // Stop token 2 is banned for 5 tokens, then its bias makes it the draw: 6 tokens, "stop".
  SamplingParams stopper = rich;
  stopper.min_new_tokens = 5;
  stopper.stop_token_ids = {2};
  stopper.logit_bias.push_back({2, 40.0f});
  SamplingParams plain = rich;
  plain.repetition_penalty = 1.0f;
  plain.frequency_penalty = plain.presence_penalty = 0.0f;
  plain.min_new_tokens = 0;
  plain.logit_bias.clear();
  auto run = [&](const std::vector<std::pair<SamplingParams, bool>>& requests) {
    Scheduler s(runner, SchedulerOptions{});
    for (size_t i = 0; i < requests.size(); ++i) {
      ServeRequest r;
      r.input_ids = prompt;
      r.input_ids.push_back(static_cast<int>(i));
      r.sampling = requests[i].first;
      r.sampling.seed = 7 + i;
      r.return_logits = requests[i].second;
      r.top_logprobs = requests[i].second ? 5 : -1;
      s.validate(r);
      s.submit(i, r);
    }
    std::map<uint64_t, RequestOutput> out;
    for (int steps = 0; s.has_work() && steps < 1000; ++steps)
      for (auto& o : s.step()) {
        RequestOutput& all = out[o.id];
        all.token_ids.insert(all.token_ids.end(), o.token_ids.begin(), o.token_ids.end());
        all.logits.insert(all.logits.end(), o.logits.begin(), o.logits.end());
        all.logprobs.insert(all.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      }
    EXPECT_TRUE(s.flush_cache());
    return out;
  };
  const auto out = run({{rich, true}, {plain, true}, {rich, false}, {stopper, true}});
  ASSERT_EQ(out.at(3).token_ids.size(), 6u);
  EXPECT_EQ(out.at(3).token_ids.back(), 2);
  for (uint64_t id : {0, 1, 3}) {
    const RequestOutput& o = out.at(id);
    const SamplingParams& p = id == 0 ? rich : id == 1 ? plain : stopper;
    const size_t n = id == 3 ? 6 : 20;
    ASSERT_EQ(o.token_ids.size(), n);
    ASSERT_EQ(o.logits.size(), n);
    ASSERT_EQ(o.logprobs.size(), n);
    std::vector<int> ids = prompt;
    ids.push_back(static_cast<int>(id));
    TokenCounts counts(ids);
    SamplingParams seeded = p;
    seeded.seed = 7 + id;
    for (int step = 0; step < static_cast<int>(n); ++step) {
      std::vector<float> row = o.logits[step];
      ASSERT_EQ(static_cast<int>(row.size()), vocab);
      const TokenLogprob want = token_logprob(row.data(), vocab, o.token_ids[step], 5);
      adjust_logits(row.data(), vocab, seeded, counts, {});
      EXPECT_EQ(o.token_ids[step], sample_token(row.data(), vocab, seeded, step))
          << "request " << id << " step " << step;
      counts.add_output(o.token_ids[step]);
      EXPECT_NEAR(o.logprobs[step].logprob, want.logprob, 1e-4);
      ASSERT_EQ(o.logprobs[step].top.size(), 5u);
      for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(o.logprobs[step].top[k].first, want.top[k].first);
        EXPECT_NEAR(o.logprobs[step].top[k].second, want.top[k].second, 1e-4);
      }
    }
  }
  for (int step = 0; step < stopper.min_new_tokens; ++step)
    EXPECT_NE(out.at(3).token_ids[step], 2) << "a stop token before min_new_tokens";
  // The same seed and controls without logits returned: the same tokens, alone or batched.
  const auto alone = run({{rich, false}});
  EXPECT_EQ(alone.at(0).token_ids, out.at(0).token_ids);
  EXPECT_NE(out.at(2).token_ids, out.at(0).token_ids);  // another seed (9)
}

}  // namespace strata::test
