#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata {

std::vector<PerplexityWindow> perplexity_windows(int n, int context_length, int stride) {
  if (n < 2) fail("perplexity needs at least 2 tokens of text, got {}", n);
  if (context_length < 2) fail("--context-length must be at least 2, got {}", context_length);
  if (stride < 1 || stride > context_length)
    fail("--stride must be between 1 and --context-length {}, got {}", context_length, stride);
  std::vector<PerplexityWindow> windows;
  for (int begin = 0, prev_end = 0;; begin += stride) {
    const int end = std::min(begin + context_length, n);
    const int first = std::max(prev_end, begin + 1);
    if (first < end) windows.push_back({begin, end, first});
    prev_end = end;
    if (end == n) return windows;
  }
}

double PerplexityResult::perplexity() const {
  return std::exp(mean_nll());
}

std::vector<GenerateRequest> perplexity_requests(const std::vector<int>& ids,
                                                 const std::vector<PerplexityWindow>& windows) {
  std::vector<GenerateRequest> requests;
  for (const auto& w : windows) {
    GenerateRequest r;
    r.input_ids.assign(ids.begin() + w.begin, ids.begin() + w.end);
    r.sampling.temperature = 0.0f;
    r.sampling.max_new_tokens = 1;
    requests.push_back(std::move(r));
  }
  return requests;
}

void accumulate_perplexity(const std::vector<PerplexityWindow>& windows, int first_window,
                           const std::vector<GenerateOutput>& outputs, PerplexityResult* result) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const PerplexityWindow& w = windows.at(first_window + i);
    const auto& lp = outputs[i].input_logprobs;
    // input_logprobs[k - 1] is the log-probability of the window's token k.
    STRATA_CHECK(static_cast<int>(lp.size()) == w.end - w.begin - 1,
                 "window {} has {} log-probabilities for {} tokens", first_window + i, lp.size(),
                 w.end - w.begin);
    for (int t = w.first; t < w.end; ++t) result->nll_sum -= lp[t - w.begin - 1];
    result->tokens_scored += w.end - w.first;
  }
}

PerplexityResult perplexity(ModelRunner& runner, const std::vector<int>& ids,
                            const PerplexityOptions& options) {
  const auto windows =
      perplexity_windows(static_cast<int>(ids.size()), options.context_length, options.stride);
  const auto requests = perplexity_requests(ids, windows);
  GenerateOptions gen;
  gen.return_input_logprobs = true;
  gen.chunked_prefill_size = options.chunked_prefill_size;
  PerplexityResult result;
  result.tokens = static_cast<int>(ids.size());
  result.windows = static_cast<int>(windows.size());
  const int batch = std::max(1, options.batch_size);
  for (size_t w = 0; w < requests.size(); w += batch) {
    const std::vector<GenerateRequest> part(
        requests.begin() + w, requests.begin() + std::min(requests.size(), w + batch));
    accumulate_perplexity(windows, static_cast<int>(w), generate(runner, part, gen), &result);
  }
  return result;
}

}  // namespace strata
