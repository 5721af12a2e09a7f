// The CPU reference of the sampling rule in ops/sampling.h.
#include "ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

namespace strata {

int sample_row(const float* logits, int vocab, const SamplingRow& row) {
  const int first_max = static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  if (row.is_greedy()) return first_max;
  const float max_logit = logits[first_max];
  const float temperature = row.temperature;
  auto weight = [&](int i) { return std::exp((logits[i] - max_logit) / temperature); };

  // t_k: the k-th largest logit.
  float threshold = -std::numeric_limits<float>::infinity();
  if (row.top_k > 0 && row.top_k < vocab) {
    std::vector<float> values(logits, logits + vocab);
    std::nth_element(values.begin(), values.begin() + (row.top_k - 1), values.end(),
                     std::greater<float>());
    threshold = values[row.top_k - 1];
  }
  // t_p: walk the top-k candidates from the most likely until their mass reaches top_p.
  if (row.top_p < 1.0f) {
    std::vector<std::pair<float, double>> candidates;  // (logit, weight)
    double mass = 0.0;
    for (int i = 0; i < vocab; ++i)
      if (logits[i] >= threshold) {
        candidates.emplace_back(logits[i], weight(i));
        mass += candidates.back().second;
      }
    std::sort(candidates.begin(), candidates.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    const double target = static_cast<double>(row.top_p) * mass;
    double upper = 0.0;
    for (const auto& [logit, w] : candidates) {
      upper += w;
      if (upper >= target) {
        threshold = std::max(threshold, logit);
        break;
      }
    }
  }
  auto kept = [&](int i, double w) { return logits[i] >= threshold && w >= row.min_p; };

  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double w = weight(i);
    if (kept(i, w)) total += w;
  }
  const double target =
      static_cast<double>(counter_uniform(row.seed(), row.step)) * static_cast<double>(total);
  double running = 0.0;
  int last_kept = first_max;
  for (int i = 0; i < vocab; ++i) {
    const double w = weight(i);
    if (!kept(i, w)) continue;
    running += w;
    last_kept = i;
    if (running > target) return i;
  }
  return last_kept;  // rounding left the target at the very end of the mass
}

}  // namespace strata
