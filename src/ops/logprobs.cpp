#include "ops/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace strata {

void row_logprobs(const float* logits, int vocab, int token, int top_n, float* out) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const double log_z = max_logit + std::log(sum);
  out[0] = static_cast<float>(logits[token] - log_z);
  const int k = std::clamp(top_n, 0, vocab);
  std::vector<int> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < k; ++i) {
    out[kLogprobHead + 2 * i] = static_cast<float>(idx[i]);
    out[kLogprobHead + 2 * i + 1] = static_cast<float>(logits[idx[i]] - log_z);
  }
}

}  // namespace strata
