// The sampling rule's CPU reference (ops/sampling.h) against a brute-force reading of the
// rule: which tokens survive each control, and that draws follow the surviving distribution.
#include "ops/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace strata {

namespace {

// The kept tokens and their probabilities, straight from the definition: sort, cut, renormalize.
std::vector<double> expected_distribution(const std::vector<float>& x, const SamplingRow& row) {
  const int n = static_cast<int>(x.size());
  const float m = *std::max_element(x.begin(), x.end());
  std::vector<double> w(n);
  for (int i = 0; i < n; ++i) w[i] = std::exp((x[i] - m) / row.temperature);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  float t = -INFINITY;
  if (row.top_k > 0 && row.top_k < n) t = x[order[row.top_k - 1]];
  double mass_k = 0;
  for (int i = 0; i < n; ++i)
    if (x[i] >= t) mass_k += w[i];
  double upper = 0;
  for (int i : order) {
    if (x[i] < t) break;
    upper += w[i];
    if (row.top_p < 1.0f && upper >= row.top_p * mass_k) {
      t = std::max(t, x[i]);
      break;
    }
  }
  std::vector<double> p(n, 0.0);
  double total = 0;
  for (int i = 0; i < n; ++i)
    if (x[i] >= t && w[i] >= row.min_p) total += p[i] = w[i];
  for (double& q : p) q /= total;
  return p;
}

SamplingRow sampled(float temperature, int top_k, float top_p, float min_p, uint64_t seed) {
  SamplingRow row;
  row.temperature = temperature;
  row.top_k = top_k;
  row.top_p = top_p;
  row.min_p = min_p;
  row.set_seed(seed);
  return row;
}

}  // namespace

TEST(SamplingRule, GreedyIsTheFirstMaximum) {
  const std::vector<float> x = {0.5f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(sample_row(x.data(), 4, SamplingRow::greedy()), 1);
  EXPECT_EQ(sample_row(x.data(), 4, sampled(1.0f, 1, 1.0f, 0.0f, 9)), 1);  // top_k 1 is greedy
}

TEST(SamplingRule, DrawsFollowTheKeptDistribution) {
  const std::vector<float> x = {1.0f, 2.5f, 0.2f, 2.4f, -1.0f, 1.9f, 0.0f, 2.5f, -3.0f, 1.2f};
  for (const SamplingRow& base :
       {sampled(1.0f, 0, 1.0f, 0.0f, 1), sampled(0.7f, 4, 1.0f, 0.0f, 2),
        sampled(1.3f, 0, 0.8f, 0.0f, 3), sampled(1.0f, 0, 1.0f, 0.3f, 4),
        sampled(0.9f, 6, 0.9f, 0.1f, 5), sampled(1.0f, 2, 1.0f, 0.0f, 6)}) {
    const std::vector<double> p = expected_distribution(x, base);
    constexpr int kDraws = 20000;
    std::vector<int> seen(x.size(), 0);
    SamplingRow row = base;
    for (int step = 0; step < kDraws; ++step) {
      row.step = step;
      ++seen[sample_row(x.data(), static_cast<int>(x.size()), row)];
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (p[i] == 0.0) {
        EXPECT_EQ(seen[i], 0) << "token " << i << " was cut, top_k " << base.top_k;
        continue;
      }
      const double sigma = std::sqrt(kDraws * p[i] * (1 - p[i]));
      EXPECT_NEAR(seen[i], kDraws * p[i], 5 * sigma + 1)
          << "token " << i << " top_k " << base.top_k << " top_p " << base.top_p << " min_p "
          << base.min_p;
    }
  }
}

TEST(SamplingRule, TopKKeepsEveryTokenTiedAtTheKthValue) {
  const std::vector<float> x = {5.0f, 4.0f, 4.0f, 4.0f, 1.0f};
  std::vector<int> seen(5, 0);
  SamplingRow row = sampled(1.0f, 2, 1.0f, 0.0f, 11);
  for (int step = 0; step < 3000; ++step) {
    row.step = step;
    ++seen[sample_row(x.data(), 5, row)];
  }
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  EXPECT_GT(seen[3], 0);
  EXPECT_EQ(seen[4], 0);
}

TEST(SamplingRule, TheDrawIsAFunctionOfSeedAndStep) {
  std::vector<float> x(300);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 2.0f;
  SamplingRow a = sampled(1.0f, 0, 0.95f, 0.0f, 77), b = a;
  int differ_by_seed = 0;
  for (int step = 0; step < 50; ++step) {
    a.step = b.step = step;
    EXPECT_EQ(sample_row(x.data(), 300, a), sample_row(x.data(), 300, b));
    SamplingRow c = a;
    c.set_seed(78);
    differ_by_seed += sample_row(x.data(), 300, a) != sample_row(x.data(), 300, c);
  }
  EXPECT_GT(differ_by_seed, 25);
  // The numbers themselves: in [0, 1), with the mean and spread of a uniform.
  double sum = 0, sq = 0;
  for (int step = 0; step < 100000; ++step) {
    const double u = counter_uniform(5, step);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_NEAR(sq / 100000 - 0.25, 1.0 / 12 - 0.0, 0.005);
}

}  // namespace strata
