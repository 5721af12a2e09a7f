#include "kernels/cpu/delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace strata::cpu {

namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct DeltaCase {
  int k_heads, v_heads, k_dim, v_dim, len, chunk;
};

}  // namespace

// The chunked form equals the token-by-token recurrence: lengths that are and are not
// multiples of the chunk, one token, chunks of 1, several value heads per key head, a non-zero
// starting state; and a sequence split in two passes equals one pass (the state carried).
TEST(DeltaRuleKernels, ChunkedEqualsSequentialAndSplitsCarryTheState) {
  std::mt19937 rng(11);
  for (const DeltaCase c :
       {DeltaCase{2, 4, 16, 16, 45, 16}, DeltaCase{1, 1, 8, 4, 1, 64}, DeltaCase{2, 2, 4, 8, 7, 1},
        DeltaCase{1, 3, 8, 8, 64, 64}, DeltaCase{2, 6, 8, 4, 100, 32}}) {
    const int qk = c.k_heads * c.k_dim, width = 2 * qk + c.v_heads * c.v_dim;
    const std::vector<float> x = randn(static_cast<size_t>(c.len) * width, rng);
    std::vector<float> beta = randn(static_cast<size_t>(c.len) * c.v_heads, rng);
    std::vector<float> g = randn(beta.size(), rng);
    for (auto& b : beta) b = 1.0f / (1.0f + std::exp(-b));
    for (auto& d : g) d = -std::exp(0.3f * d) * 0.5f;
    const std::vector<float> start = randn(static_cast<size_t>(c.v_heads) * c.k_dim * c.v_dim, rng);
    auto args = [&](int t0, int n) {
      DeltaRuleArgs a;
      a.num_k_heads = c.k_heads;
      a.num_v_heads = c.v_heads;
      a.k_dim = c.k_dim;
      a.v_dim = c.v_dim;
      a.len = n;
      a.q = x.data() + int64_t{t0} * width;
      a.k = a.q + qk;
      a.v = a.k + qk;
      a.stride = width;
      a.beta = beta.data() + int64_t{t0} * c.v_heads;
      a.g = g.data() + int64_t{t0} * c.v_heads;
      return a;
    };
    const size_t ny = static_cast<size_t>(c.len) * c.v_heads * c.v_dim;
    std::vector<float> s_seq = start, s_chunk = start, s_split = start;
    std::vector<float> y_seq(ny), y_chunk(ny), y_split(ny);
    delta_rule_sequential(args(0, c.len), s_seq.data(), y_seq.data());
    delta_rule_chunked(args(0, c.len), c.chunk, s_chunk.data(), y_chunk.data());
    const int half = c.len / 2;
    delta_rule_chunked(args(0, half), c.chunk, s_split.data(), y_split.data());
    delta_rule_chunked(args(half, c.len - half), c.chunk, s_split.data(),
                       y_split.data() + static_cast<size_t>(half) * c.v_heads * c.v_dim);
    for (size_t i = 0; i < ny; ++i) {
      ASSERT_NEAR(y_chunk[i], y_seq[i], 1e-4) << "len " << c.len << " chunk " << c.chunk;
      ASSERT_NEAR(y_split[i], y_seq[i], 1e-4) << "split, len " << c.len;
    }
    for (size_t i = 0; i < s_seq.size(); ++i) {
      ASSERT_NEAR(s_chunk[i], s_seq[i], 1e-4) << "state, len " << c.len;
      ASSERT_NEAR(s_split[i], s_seq[i], 1e-4) << "split state, len " << c.len;
    }
  }
}

}  // namespace strata::cpu
