#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace strata {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw RequestError(fmt::format("temperature must be >= 0, got {}", temperature));
  if (top_k < 0)
    throw RequestError(fmt::format("top_k must be >= 0 (0 disables it), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw RequestError(fmt::format("top_p must be in (0, 1], got {}", top_p));
  if (max_new_tokens < 0)
    throw RequestError(fmt::format("max_new_tokens must be >= 0, got {}", max_new_tokens));
}

int sample_token(const float* logits, int vocab, const SamplingParams& p, std::mt19937_64& rng) {
  if (p.temperature == 0.0f || p.top_k == 1) {
    return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  }
  // Candidates sorted by logit, cut by top-k, softmax at temperature, cut by top-p.
  std::vector<int> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  const int k = p.top_k > 0 ? std::min(p.top_k, vocab) : vocab;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  idx.resize(k);
  std::vector<double> probs(k);
  const double max_logit = logits[idx[0]];
  double sum = 0.0;
  for (int i = 0; i < k; ++i)
    sum += probs[i] = std::exp((logits[idx[i]] - max_logit) / p.temperature);
  int keep = k;
  if (p.top_p < 1.0f) {
    double cumulative = 0.0;
    for (int i = 0; i < k; ++i) {
      cumulative += probs[i] / sum;
      if (cumulative >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<int> dist(probs.begin(), probs.begin() + keep);
  return idx[dist(rng)];
}

TokenLogprob token_logprob(const float* logits, int vocab, int token, int top_n) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const double log_z = max_logit + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<float>(logits[token] - log_z);
  const int k = std::clamp(top_n, 0, vocab);
  std::vector<int> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < k; ++i)
    out.top.emplace_back(idx[i], static_cast<float>(logits[idx[i]] - log_z));
  return out;
}

}  // namespace strata
