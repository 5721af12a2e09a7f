#pragma once
// Perplexity of a token sequence, scored through the generate machinery (no forward loop of
// its own): the sequence is cut into windows of at most `context_length` tokens, each run as
// one prompt from an empty cache with GenerateOptions::return_input_logprobs, and the
// log-probabilities of the tokens each window scores are summed.
//
// Windows (as Hugging Face's "perplexity of fixed-length models" strided evaluation): window
// w covers tokens [w * stride, w * stride + context_length) clipped to the sequence, and scores
// the targets in it that no earlier window scored, each from the logits of the token before
// it in the same window. With stride < context_length every token but the first is scored
// once, each with at least context_length - stride tokens of context (all before it, in the
// first window); with stride == context_length the windows are disjoint and the first token
// of each is not scored (nothing precedes it in its window). tools/train_tiny/train.py
// implements the same windows in torch (window_spans).
#include <vector>

#include "runtime/generator.h"

namespace strata {

struct PerplexityWindow {
  int begin = 0, end = 0;  // tokens [begin, end) are fed
  int first = 0;           // targets [first, end) are scored
};

// The windows over n tokens (Error unless n >= 2 and 1 <= stride <= context_length).
std::vector<PerplexityWindow> perplexity_windows(int n, int context_length, int stride);

struct PerplexityResult {
  int tokens = 0, windows = 0;
  int64_t tokens_scored = 0;
  double nll_sum = 0;  // -sum of log p over the scored tokens (natural log)
  double mean_nll() const { return tokens_scored ? nll_sum / tokens_scored : 0.0; }
  double perplexity() const;
};

// One greedy one-token request per window (the token is generated only because a request
// must ask for one; it is not used).
std::vector<GenerateRequest> perplexity_requests(const std::vector<int>& ids,
                                                 const std::vector<PerplexityWindow>& windows);

// Adds up the scored targets of `windows[first_window ...]` from their generate outputs (made
// with return_input_logprobs), one output per window in order.
void accumulate_perplexity(const std::vector<PerplexityWindow>& windows, int first_window,
                           const std::vector<GenerateOutput>& outputs, PerplexityResult* result);

struct PerplexityOptions {
  int context_length = 0;
  int stride = 0;
  int batch_size = 8;  // windows per generate call (their logits are kept for every token)
  int chunked_prefill_size = 0;
};

// Scores `ids` on `runner` (one process: the whole model), batch_size windows at a time.
PerplexityResult perplexity(ModelRunner& runner, const std::vector<int>& ids,
                            const PerplexityOptions& options);

}  // namespace strata
