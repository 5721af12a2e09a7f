#pragma once
// One request as the scheduler tracks it (scheduler.cpp, scheduler_cache.cpp and
// scheduler_draws.cpp share it; nothing else includes this).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "runtime/scheduler.h"

namespace strata {

struct Scheduler::Req {
  uint64_t id = 0;
  ServeRequest request;
  std::vector<int> tokens;  // prompt + generated so far
  int prompt_len = 0;
  int row = -1;                        // ReqToTokenPool row while admitted
  int cached = 0;                      // tokens whose KV is stored
  int prefill_end = 0;                 // cached must reach this before the next token is sampled
  int state_slot = -1;                 // recurrent-state slot while admitted (hybrid models)
  int track_slot = -1;                 // the state after the last page boundary decoded past
  int track_len = 0;                   // ... and that boundary (pages > 1, hybrid, cache on)
  RadixCache::Node* locked = nullptr;  // the prefix-cache path this request reads
  uint64_t admitted_at = 0;            // admission order: the newest is retracted first
  bool admitted_before = false;
  int cached_tokens = 0;  // prompt tokens the prefix cache served at the first admission
  TokenCounts counts;     // what its penalties read (kept only when it has any)
  RequestOutput out;      // accumulated since the last output was taken
  bool finished = false;
  bool in_flight = false;  // a member of a pass whose draws are not taken yet
  // Failed mid-pass: its KV beyond the last good pass may be unwritten, so none is cached.
  bool failed = false;
  // Sent back to the queue by a retraction, when completions_ was this: it waits for another
  // request to finish before it is admitted again.
  std::optional<uint64_t> retracted_at;
  // Stop strings: the output's text stream, and the end of its text that a stop string
  // completed by a later token could still begin in.
  std::unique_ptr<TextStream> text;
  std::string text_tail;
  std::unique_ptr<grammar::GrammarMatcher> matcher;  // with a grammar: where its output is
  // Prompt logprobs: the next prompt token whose logprob is still to be recorded (prompt_len:
  // none left). Kept over a retraction, so that a recomputed prompt records nothing twice.
  int prompt_logprob_next = 0;

  bool wants_prompt_logits() const { return prompt_logprob_next < prompt_len; }

  int generated() const { return static_cast<int>(tokens.size()) - prompt_len; }
  bool prefilling() const { return cached < prefill_end; }
};

}  // namespace strata
