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

}  // namespace strata::test
