#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace strata::cpu {

namespace {

struct RangeCase {
  int kv_heads, dk, dv;
  bool v_in_k;  // MLA's latent: the value is the key row's leading dv columns
  float softcap;
};

// A paged cache of `slots` rows with every kv head side by side, and a shuffled slot table,
// so consecutive keys sit in scattered rows.
struct Cache {
  std::vector<float> k, v;
  std::vector<int32_t> table;
  PagedKV view;
};

Cache make_cache(const RangeCase& c, int slots, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Cache cache;
  const int64_t k_stride = static_cast<int64_t>(c.kv_heads) * c.dk;
  const int64_t v_stride = c.v_in_k ? k_stride : static_cast<int64_t>(c.kv_heads) * c.dv;
  cache.k.resize(slots * k_stride);
  for (auto& x : cache.k) x = d(rng);
  if (!c.v_in_k) {
    cache.v.resize(slots * v_stride);
    for (auto& x : cache.v) x = d(rng);
  }
  cache.table.resize(slots);
  std::iota(cache.table.begin(), cache.table.end(), 0);
  std::shuffle(cache.table.begin(), cache.table.end(), rng);
  cache.view = {
      cache.k.data(), c.v_in_k ? cache.k.data() : cache.v.data(), k_stride, v_stride, c.dk, c.dv};
  return cache;
}

// Softmax-weighted values in double, the definition attend_range implements.
void reference(const std::vector<float>& q, const Cache& cache, const RangeCase& c, int kv_head,
               int begin, int end, float scale, std::vector<double>& out, double& lse) {
  const PagedKV& kv = cache.view;
  std::vector<double> s;
  for (int j = begin; j < end; ++j) {
    const float* k = kv.k + static_cast<int64_t>(cache.table[j]) * kv.k_row_stride + kv_head * c.dk;
    double dot = 0.0;
    for (int d = 0; d < c.dk; ++d) dot += static_cast<double>(q[d]) * k[d];
    dot *= scale;
    if (c.softcap > 0.0f) dot = c.softcap * std::tanh(dot / c.softcap);
    s.push_back(dot);
  }
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0.0;
  out.assign(c.dv, 0.0);
  for (int j = begin; j < end; ++j) {
    const double w = std::exp(s[j - begin] - m);
    sum += w;
    const float* v = kv.v + static_cast<int64_t>(cache.table[j]) * kv.v_row_stride + kv_head * c.dv;
    for (int d = 0; d < c.dv; ++d) out[d] += w * v[d];
  }
  for (auto& x : out) x /= sum;
  lse = m + std::log(sum);
}

class AttendRange : public ::testing::TestWithParam<RangeCase> {};

// Every SIMD level gives the portable loops' bits, and both match the definition, on widths in
// whole vectors (the AVX-512 path where the CPU has it), widths with a tail (portable
// everywhere), MLA's latent and a soft cap; ranges from one key to a few hundred, the last
// kv head included.
TEST_P(AttendRange, EveryLevelGivesThePortableBitsAndMatchesTheDefinition) {
  const RangeCase c = GetParam();
  std::mt19937 rng(7 + c.dk + c.dv);
  const int slots = 700;
  const Cache cache = make_cache(c, slots, rng);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> q(c.dk);
  for (auto& x : q) x = d(rng);
  const ScoreParams p{1.0f / std::sqrt(static_cast<float>(c.dk)), c.softcap};
  std::vector<float> scores(slots), out_best(c.dv), out_portable(c.dv);
  for (const auto& [begin, end] : {std::pair{0, 1}, {3, 10}, {0, 16}, {5, 165}, {17, 700}}) {
    for (int kv_head : {0, c.kv_heads - 1}) {
      float lse_best = 0.0f, lse_portable = 0.0f;
      attend_range(q.data(), cache.view, kv_head, cache.table.data(), begin, end, p, scores.data(),
                   out_best.data(), &lse_best, Simd::Best);
      attend_range(q.data(), cache.view, kv_head, cache.table.data(), begin, end, p, scores.data(),
                   out_portable.data(), &lse_portable, Simd::Portable);
      EXPECT_EQ(0, std::memcmp(out_best.data(), out_portable.data(), sizeof(float) * c.dv))
          << "keys [" << begin << ", " << end << "), kv head " << kv_head;
      EXPECT_EQ(lse_best, lse_portable);
      std::vector<double> want;
      double want_lse = 0.0;
      reference(q, cache, c, kv_head, begin, end, p.scale, want, want_lse);
      for (int i = 0; i < c.dv; ++i)
        ASSERT_NEAR(out_best[i], want[i], 2e-5)
            << "column " << i << ", keys [" << begin << ", " << end << "), kv head " << kv_head;
      EXPECT_NEAR(lse_best, want_lse, 2e-5 * std::max(1.0, std::fabs(want_lse)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Widths, AttendRange,
    ::testing::Values(RangeCase{4, 128, 128, false, 0.0f}, RangeCase{2, 64, 64, false, 0.0f},
                      RangeCase{1, 256, 256, false, 0.0f}, RangeCase{3, 48, 144, false, 0.0f},
                      RangeCase{2, 128, 128, false, 30.0f}, RangeCase{1, 576, 512, true, 0.0f},
                      RangeCase{2, 72, 40, false, 0.0f}, RangeCase{1, 80, 64, true, 0.0f}));

// A query group at once, each key and value row read once for up to eight heads, gives every
// head attend_range's bits (one head at a time), at every level: groups of 2 to 8 heads, 12 (a
// group of 8 then 4), 16 (MLA-like, many heads on one latent), and the outputs and lses written
// at strides, as the backend's split partials are.
TEST_P(AttendRange, AGroupOfHeadsGivesEachHeadsBits) {
  const RangeCase c = GetParam();
  std::mt19937 rng(11 + c.dk);
  const int slots = 300;
  const Cache cache = make_cache(c, slots, rng);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const ScoreParams p{1.0f / std::sqrt(static_cast<float>(c.dk)), c.softcap};
  for (int heads : {2, 3, 4, 5, 7, 8, 12, 16}) {
    std::vector<float> q(static_cast<size_t>(heads) * c.dk);
    for (auto& x : q) x = d(rng);
    for (const auto& [begin, end] : {std::pair{0, 1}, {3, 20}, {0, 300}, {7, 7}}) {
      for (Simd simd : {Simd::Best, Simd::Portable}) {
        const int64_t out_stride = 2 * c.dv + 16, lse_stride = 3;
        std::vector<float> scores(static_cast<size_t>(heads) * std::max(end - begin, 1));
        std::vector<float> out(heads * out_stride, 7.0f), lse(heads * lse_stride, 7.0f);
        attend_group_range(q.data(), heads, cache.view, c.kv_heads - 1, cache.table.data(), begin,
                           end, p, scores.data(), out.data(), out_stride, lse.data(), lse_stride,
                           simd);
        for (int h = 0; h < heads; ++h) {
          std::vector<float> one(c.dv);
          float one_lse = 0.0f;
          attend_range(q.data() + h * c.dk, cache.view, c.kv_heads - 1, cache.table.data(), begin,
                       end, p, scores.data(), one.data(), &one_lse, simd);
          EXPECT_EQ(0, std::memcmp(one.data(), out.data() + h * out_stride, sizeof(float) * c.dv))
              << heads << " heads, head " << h << ", keys [" << begin << ", " << end << ")";
          EXPECT_EQ(std::memcmp(&one_lse, &lse[h * lse_stride], sizeof(float)), 0)
              << heads << " heads, head " << h;
        }
      }
    }
  }
}

TEST(AttendRange, EmptyRangeIsZeroWithMinusInfinityLse) {
  const RangeCase c{1, 64, 64, false, 0.0f};
  std::mt19937 rng(3);
  const Cache cache = make_cache(c, 8, rng);
  std::vector<float> q(64, 1.0f), scores(8), out(64, 5.0f);
  for (Simd simd : {Simd::Best, Simd::Portable}) {
    float lse = 0.0f;
    attend_range(q.data(), cache.view, 0, cache.table.data(), 4, 4, ScoreParams{}, scores.data(),
                 out.data(), &lse, simd);
    EXPECT_TRUE(std::isinf(lse) && lse < 0);
    for (float x : out) EXPECT_EQ(x, 0.0f);
  }
}

}  // namespace

}  // namespace strata::cpu
