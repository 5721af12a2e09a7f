#include "kernels/cpu/mamba.h"

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

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

struct ScanCase {
  int heads, head_dim, groups, state, len, chunk;
};

}  // namespace

// The SSD chunked scan equals the token-by-token recurrence for lengths that are and are not
// multiples of the chunk, chunks of 1, and a non-zero starting state.
TEST(MambaKernels, ChunkedScanEqualsSequentialScan) {
  std::mt19937 rng(7);
  for (const ScanCase c :
       {ScanCase{4, 8, 2, 16, 37, 16}, ScanCase{4, 8, 1, 8, 16, 16}, ScanCase{2, 4, 2, 4, 5, 1},
        ScanCase{6, 3, 3, 5, 1, 8}, ScanCase{8, 16, 2, 16, 100, 7}}) {
    const int I = c.heads * c.head_dim, GN = c.groups * c.state, stride = I + 2 * GN;
    const auto xbc = randn(static_cast<size_t>(c.len) * stride, rng);
    std::vector<float> dt(static_cast<size_t>(c.len) * c.heads), A(c.heads),
        D = randn(c.heads, rng);
    std::uniform_real_distribution<float> u(0.001f, 0.5f);
    for (auto& v : dt) v = u(rng);
    for (int h = 0; h < c.heads; ++h) A[h] = -static_cast<float>(h + 1);
    SsmScanArgs a;
    a.num_heads = c.heads;
    a.head_dim = c.head_dim;
    a.n_groups = c.groups;
    a.state_size = c.state;
    a.len = c.len;
    a.x = xbc.data();
    a.B = xbc.data() + I;
    a.C = xbc.data() + I + GN;
    a.stride = stride;
    a.dt = dt.data();
    a.A = A.data();
    a.D = D.data();
    const auto start = randn(static_cast<size_t>(c.heads) * c.head_dim * c.state, rng);
    std::vector<float> s1 = start, s2 = start, y1(static_cast<size_t>(c.len) * I), y2(y1.size());
    ssm_scan_sequential(a, s1.data(), y1.data());
    ssm_scan_chunked(a, c.chunk, s2.data(), y2.data());
    EXPECT_LE(max_diff(y1, y2), 1e-4) << "len " << c.len << " chunk " << c.chunk;
    EXPECT_LE(max_diff(s1, s2), 1e-4) << "len " << c.len << " chunk " << c.chunk;
  }
}

// Scanning a sequence in two calls, passing the state, equals scanning it in one.
TEST(MambaKernels, ScanResumesFromItsState) {
  std::mt19937 rng(3);
  const int H = 4, P = 4, G = 2, N = 8, len = 29, split = 11, I = H * P, stride = I + 2 * G * N;
  const auto xbc = randn(static_cast<size_t>(len) * stride, rng);
  std::vector<float> dt(static_cast<size_t>(len) * H, 0.1f), A = {-1, -2, -0.5f, -3},
                                                             D = {1, 1, 1, 1};
  auto args = [&](int begin, int n) {
    SsmScanArgs a;
    a.num_heads = H;
    a.head_dim = P;
    a.n_groups = G;
    a.state_size = N;
    a.len = n;
    a.x = xbc.data() + begin * stride;
    a.B = a.x + I;
    a.C = a.B + G * N;
    a.stride = stride;
    a.dt = dt.data() + begin * H;
    a.A = A.data();
    a.D = D.data();
    return a;
  };
  std::vector<float> s_whole(H * P * N, 0.0f), s_parts(H * P * N, 0.0f), y_whole(len * I),
      y_parts(len * I);
  ssm_scan_chunked(args(0, len), 8, s_whole.data(), y_whole.data());
  ssm_scan_chunked(args(0, split), 8, s_parts.data(), y_parts.data());
  ssm_scan_chunked(args(split, len - split), 8, s_parts.data(), y_parts.data() + split * I);
  EXPECT_LE(max_diff(y_whole, y_parts), 1e-5);
  EXPECT_LE(max_diff(s_whole, s_parts), 1e-5);
}

// The conv with a rolling state gives the same outputs fed whole, in pieces, or a row at a time.
TEST(MambaKernels, CausalConvWithStateEqualsWholeSequence) {
  std::mt19937 rng(5);
  const int C = 6, K = 4, len = 13;
  const auto x = randn(static_cast<size_t>(len) * C, rng), w = randn(C * K, rng), b = randn(C, rng);
  std::vector<float> state_whole(C * (K - 1), 0.0f), out_whole(len * C);
  causal_conv1d(x.data(), C, len, C, w.data(), b.data(), K, state_whole.data(), out_whole.data(),
                true);
  // Direct definition: out[t, c] = silu(b + sum_k w[c, k] x[t - (K-1) + k, c]), zero before t = 0.
  for (int t = 0; t < len; ++t)
    for (int c = 0; c < C; ++c) {
      float acc = b[c];
      for (int k = 0; k < K; ++k) {
        const int j = t - (K - 1) + k;
        if (j >= 0) acc += w[c * K + k] * x[j * C + c];
      }
      EXPECT_NEAR(out_whole[t * C + c], acc / (1.0f + std::exp(-acc)), 1e-5);
    }
  for (int piece : {1, 2, 5}) {
    std::vector<float> state(C * (K - 1), 0.0f), out(len * C);
    for (int t0 = 0; t0 < len; t0 += piece) {
      const int n = std::min(piece, len - t0);
      causal_conv1d(x.data() + t0 * C, C, n, C, w.data(), b.data(), K, state.data(),
                    out.data() + t0 * C, true);
    }
    EXPECT_LE(max_diff(out, out_whole), 1e-6) << "piece " << piece;
    EXPECT_LE(max_diff(state, state_whole), 0.0) << "piece " << piece;
  }
}

TEST(MambaKernels, GatedNormNormalizesEachGroup) {
  const int width = 8, groups = 2;
  std::vector<float> y = {1, 2, 3, 4, 10, 20, 30, 40}, z(width, 50.0f),
                     w(width, 1.0f);  // silu(50) ~ 50
  gated_rms_norm(y.data(), z.data(), width, 1, width, groups, w.data(), 0.0f, false, nullptr, 0, 0);
  for (int g = 0; g < groups; ++g) {
    double ss = 0;
    for (int i = 0; i < 4; ++i) ss += y[g * 4 + i] * y[g * 4 + i];
    EXPECT_NEAR(ss / 4, 1.0, 1e-4) << "group " << g;
  }
  EXPECT_NEAR(y[1] / y[0], 2.0, 1e-5);
  std::vector<float> gate_only = {1, -2}, zz = {0, 1};
  gated_rms_norm(gate_only.data(), zz.data(), 2, 1, 2, 1, nullptr, 0.0f, false, nullptr, 0, 0);
  EXPECT_EQ(gate_only[0], 0.0f);  // silu(0) = 0
  EXPECT_NEAR(gate_only[1], -2.0f / (1.0f + std::exp(-1.0f)), 1e-6);
}

// One norm group split over two "ranks" (columns [0, 5) and [5, 12) of each row): each part's
// sums of squares, added, normalize each part to exactly what the whole row's norm gives, gate
// first or norm first.
TEST(MambaKernels, GatedNormOverRanksEqualsTheWholeRow) {
  const int rows = 3, width = 12, split = 5;
  std::vector<float> y(rows * width), z(rows * width), w(width);
  for (int i = 0; i < rows * width; ++i) {
    y[i] = std::sin(0.7f * i) * 3.0f;
    z[i] = std::cos(0.3f * i) * 2.0f;
  }
  for (int i = 0; i < width; ++i) w[i] = 0.5f + 0.1f * i;
  for (bool before : {false, true}) {
    std::vector<float> whole = y;
    gated_rms_norm(whole.data(), z.data(), width, rows, width, 1, w.data(), 1e-5f, before, nullptr,
                   0, 0);
    std::vector<float> sums(rows, 0.0f);
    for (auto [c0, c1] : {std::pair{0, split}, std::pair{split, width}}) {
      std::vector<float> part_y, part_z, part_sums(rows);
      for (int r = 0; r < rows; ++r)
        for (int c = c0; c < c1; ++c) {
          part_y.push_back(y[r * width + c]);
          part_z.push_back(z[r * width + c]);
        }
      gated_sum_squares(part_y.data(), part_z.data(), c1 - c0, rows, c1 - c0, 1, before,
                        part_sums.data(), 1);
      for (int r = 0; r < rows; ++r) sums[r] += part_sums[r];
    }
    for (auto [c0, c1] : {std::pair{0, split}, std::pair{split, width}}) {
      std::vector<float> part_y, part_z;
      for (int r = 0; r < rows; ++r)
        for (int c = c0; c < c1; ++c) {
          part_y.push_back(y[r * width + c]);
          part_z.push_back(z[r * width + c]);
        }
      gated_rms_norm(part_y.data(), part_z.data(), c1 - c0, rows, c1 - c0, 1, w.data() + c0, 1e-5f,
                     before, sums.data(), 1, width);
      for (int r = 0; r < rows; ++r)
        for (int c = c0; c < c1; ++c)
          EXPECT_NEAR(part_y[r * (c1 - c0) + c - c0], whole[r * width + c], 1e-5)
              << "before " << before << " row " << r << " col " << c;
    }
  }
}

}  // namespace strata::cpu
