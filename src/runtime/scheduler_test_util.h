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

// Submits one request per entry of `requests` (ids 0, 1, ...), each with `sampling` but its
// own prompt, seed and return_logits (which decides whether it is drawn on the device or on
// the host), and returns each one's tokens once all are done.
struct SampledRequest {
  std::vector<int> prompt;
  uint64_t seed = 0;
  bool return_logits = false;
};
inline std::map<uint64_t, std::vector<int>> run_sampled(Scheduler& s,
                                                        const std::vector<SampledRequest>& requests,
                                                        const SamplingParams& sampling) {
  for (size_t i = 0; i < requests.size(); ++i) {
    ServeRequest r;
    r.input_ids = requests[i].prompt;
    r.sampling = sampling;
    r.sampling.seed = requests[i].seed;
    r.return_logits = requests[i].return_logits;
    s.validate(r);
    s.submit(i, r);
  }
  std::map<uint64_t, std::vector<int>> ids;
  for (int steps = 0; s.has_work() && steps < 10000; ++steps)
    for (auto& o : s.step())
      ids[o.id].insert(ids[o.id].end(), o.token_ids.begin(), o.token_ids.end());
  EXPECT_FALSE(s.has_work());
  return ids;
}

}  // namespace strata::test
