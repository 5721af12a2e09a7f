// cpu::linear against a double-precision reference on awkward sizes: every row count the
// decode kernel takes (1-8) and the sgemm path past it, k not a multiple of the vector width,
// odd n, with and without bias.
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_bf16_dot.h"

namespace strata::cpu {
namespace {

TEST(CpuLinear, MatchesReferenceOnAwkwardSizes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t m : {1, 2, 3, 5, 7, 8, 9, 17}) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {8, 5}, {37, 129}, {300, 67}}) {
      for (bool with_bias : {false, true}) {
        std::vector<float> x(m * k), w(n * k), bias(n), y(m * n, 123.0f);
        for (auto* v : {&x, &w, &bias})
          for (float& e : *v) e = dist(rng);
        linear(x.data(), m, k, w.data(), n, with_bias ? bias.data() : nullptr, y.data());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = with_bias ? bias[j] : 0.0;
            for (int64_t t = 0; t < k; ++t) want += double(x[i * k + t]) * w[j * k + t];
            ASSERT_NEAR(y[i * n + j], want, 1e-4 * (1 + std::sqrt(double(k))))
                << "m " << m << " k " << k << " n " << n << " bias " << with_bias;
          }
      }
    }
  }
}

// linear_bf16 against the double-precision product of the bf16-rounded inputs and weights, at every
// instruction-set level (the ones this CPU lacks fall back to the next, still tested): k below,
// at and past the 32-column vdpbf16ps step (masked tails), n and m that leave remainders after
// the 4 x 4 prefill tiles and the decode passes.
TEST(CpuLinearBf16, MatchesTheProductWithRoundedWeightsAtEveryLevel) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (Simd simd :
       {Simd::Best, Simd::Amx, Simd::Avx512Bf16, Simd::Avx512, Simd::Avx2, Simd::Portable})
    for (int64_t m : {1, 2, 4, 7, 8, 9, 33, 70}) {
      for (auto [k, n] :
           {std::pair<int64_t, int64_t>{1, 1}, {15, 3}, {16, 5}, {37, 129}, {64, 9}, {300, 67}}) {
        std::vector<float> x(m * k), bias(n), y(m * n, 123.0f);
        std::vector<uint16_t> w(n * k);
        for (float& e : x) e = dist(rng);
        for (float& e : bias) e = dist(rng);
        for (uint16_t& e : w) e = f32_to_bf16(dist(rng));
        linear_bf16(x.data(), m, k, w.data(), n, bias.data(), y.data(), simd);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = bias[j];
            for (int64_t t = 0; t < k; ++t)
              want += double(bf16_to_f32(f32_to_bf16(x[i * k + t]))) * bf16_to_f32(w[j * k + t]);
            ASSERT_NEAR(y[i * n + j], want, 1e-4 * (1 + std::sqrt(double(k))))
                << "simd " << static_cast<int>(simd) << " m " << m << " k " << k << " n " << n;
          }
      }
    }
}

// The inputs' rounding is f32_to_bf16's, bit for bit, in the vector form and the scalar one
// (ties to even, carries into the exponent, infinities, NaNs, denormals), at every offset of a
// 16-value vector.
TEST(CpuLinearBf16, RoundsInputsAsF32ToBf16) {
  std::mt19937 rng(5);
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x00008000u, 0x00018000u,
                                    0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u,
                                    0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu,
                                    0x00000001u, 0x807fffffu, 0x3f7fffffu, 0x3f80c000u};
  for (int i = 0; i < 4000; ++i) patterns.push_back(rng());
  std::vector<float> x(patterns.size());
  std::memcpy(x.data(), patterns.data(), x.size() * sizeof(float));
  for (int64_t offset : {0, 3}) {
    const int64_t count = static_cast<int64_t>(x.size()) - offset;
    std::vector<uint16_t> rounded(count);
    bf16_dot::round_to_bf16(x.data() + offset, count, rounded.data());
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(rounded[i], f32_to_bf16(x[offset + i]))
          << "pattern 0x" << std::hex << patterns[offset + i];
  }
}

// With vdpbf16ps one kernel takes every row count and sums every output in one order, so a row
// of a prefill (more than 8 rows, 4 x 4 tiles, blocks of rows) equals that row decoded alone,
// bit for bit: chunked prefill, batched decode and single decode agree exactly.
TEST(CpuLinearBf16, Vdpbf16psRowsDoNotDependOnTheRowCount) {
  if (!bf16_dot::available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto [k, n] : {std::pair<int64_t, int64_t>{40, 7}, {300, 67}, {2100, 130}}) {
    const int64_t max_m = 70;  // past one 256 KiB block of rows at k = 2100
    std::vector<float> x(max_m * k);
    std::vector<uint16_t> w(n * k);
    for (float& e : x) e = dist(rng);
    for (uint16_t& e : w) e = f32_to_bf16(dist(rng));
    auto product = [&](const float* rows, int64_t m) {
      std::vector<float> y(m * n);
      linear_bf16(rows, m, k, w.data(), n, nullptr, y.data(), Simd::Avx512Bf16);
      return y;
    };
    std::vector<std::vector<float>> alone;
    for (int64_t r = 0; r < max_m; ++r) alone.push_back(product(x.data() + r * k, 1));
    for (int64_t m : {2, 3, 5, 8, 9, 13, 33, 70}) {
      const std::vector<float> batch = product(x.data(), m);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(batch[r * n + j], alone[r][j])
              << "m " << m << " row " << r << " k " << k << " col " << j;
    }
  }
}

// The AMX-BF16 B tiles (gathered, 16 rows apart; the last partial block pair by pair) against
// their definition, on shapes that end inside a block and a group: runs on any AVX-512 CPU.
TEST(CpuLinearBf16, AmxTilesHoldTheWeightPairs) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU has no AVX-512";
  std::mt19937 rng(29);
  for (auto [k, n] :
       {std::pair<int64_t, int64_t>{1, 3}, {31, 16}, {64, 17}, {95, 40}, {2048, 33}}) {
    std::vector<uint16_t> w(n * k);
    for (uint16_t& e : w) e = static_cast<uint16_t>(rng());
    const int64_t blocks = (k + 31) / 32;
    for (int64_t n0 = 0; n0 < n; n0 += 16) {
      std::vector<uint32_t> tiles(blocks * 256, 0xdeadbeef);
      amx::repack_group(w.data(), k, n, n0, tiles.data());
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t i = 0; i < 16; ++i)
          for (int64_t j = 0; j < 16; ++j) {
            auto at = [&](int64_t c) -> uint32_t {
              return n0 + j < n && c < k ? w[(n0 + j) * k + c] : 0;
            };
            const uint32_t want = at(32 * b + 2 * i) | at(32 * b + 2 * i + 1) << 16;
            ASSERT_EQ(tiles[b * 256 + i * 16 + j], want)
                << "k " << k << " n " << n << " n0 " << n0 << " block " << b << " row " << i
                << " lane " << j;
          }
    }
  }
}

// AMX-BF16 (prefill shapes, more than 8 rows): every output sums its 32-column blocks in one
// order whatever the row count, so a row of a 9-row product equals the same row of a 70-row one,
// bit for bit, across the 16-row tiles and 64-row passes (remainders of both), with k and n
// that leave partial blocks and groups.
TEST(CpuLinearBf16, AmxRowsDoNotDependOnTheRowCount) {
  if (!amx::has_bf16()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or Linux did not grant it)";
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto [k, n] : {std::pair<int64_t, int64_t>{40, 7}, {300, 67}, {2100, 130}}) {
    const int64_t max_m = 70;
    std::vector<float> x(max_m * k);
    std::vector<uint16_t> w(n * k);
    for (float& e : x) e = dist(rng);
    for (uint16_t& e : w) e = f32_to_bf16(dist(rng));
    auto product = [&](int64_t m) {
      std::vector<float> y(m * n);
      linear_bf16(x.data(), m, k, w.data(), n, nullptr, y.data(), Simd::Amx);
      return y;
    };
    const std::vector<float> all = product(max_m);
    for (int64_t m : {9, 16, 17, 33, 64, 65}) {
      const std::vector<float> some = product(m);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(some[r * n + j], all[r * n + j])
              << "m " << m << " row " << r << " k " << k << " col " << j;
    }
  }
}

// A decode row's output does not depend on the batch it is in: row r of a 1-8 row product
// equals, bit for bit, the product of that row alone, for f32 and bf16 weights at every
// instruction-set level (the kernels pass several weight rows at a time for narrow batches and
// split wide ones, but form every sum the same way), over k with and without whole vectors and
// n that leaves a remainder after the passes.
TEST(CpuLinear, DecodeRowsAreBatchInvariant) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto [k, n] : {std::pair<int64_t, int64_t>{24, 7}, {300, 67}, {1000, 130}}) {
    std::vector<float> x(8 * k), w(n * k), bias(n);
    std::vector<uint16_t> w_bf16(n * k);
    for (auto* v : {&x, &w, &bias})
      for (float& e : *v) e = dist(rng);
    for (int64_t i = 0; i < n * k; ++i) w_bf16[i] = f32_to_bf16(w[i]);
    auto product = [&](int kind, Simd simd, const float* rows, int64_t m) {
      std::vector<float> y(m * n);
      if (kind == 0)
        linear(rows, m, k, w.data(), n, bias.data(), y.data());
      else
        linear_bf16(rows, m, k, w_bf16.data(), n, bias.data(), y.data(), simd);
      return y;
    };
    for (int kind : {0, 1})
      for (Simd simd : {Simd::Best, Simd::Avx512Bf16, Simd::Avx512, Simd::Avx2, Simd::Portable}) {
        if (kind == 0 && simd != Simd::Best) continue;  // f32 has one decode kernel
        for (int64_t m = 1; m <= 8; ++m) {
          const std::vector<float> batch = product(kind, simd, x.data(), m);
          for (int64_t r = 0; r < m; ++r) {
            const std::vector<float> alone = product(kind, simd, x.data() + r * k, 1);
            for (int64_t j = 0; j < n; ++j)
              ASSERT_EQ(batch[r * n + j], alone[j])
                  << (kind ? "bf16" : "f32") << " simd " << static_cast<int>(simd) << " m " << m
                  << " row " << r << " k " << k << " col " << j;
          }
        }
      }
  }
}

// Products large enough to split over the OpenMP threads (blocks of output columns, each
// OpenBLAS call single-threaded; bf16 prefill panels handed out in turn), with n not a
// multiple of the 16-column block boundary and blocks of unequal width: every column equals
// the double-precision product, for linear, matmul and linear_bf16 over several panels, on 1,
// 2 and 3 threads (more threads than this machine's cores included).
TEST(CpuGemmThreads, SplitProductsEqualTheReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Shape {
    int64_t m, k, n;
  };
  for (int threads : {1, 2, 3})
    for (const Shape s : {Shape{300, 300, 130}, Shape{33, 300, 1001}, Shape{9, 300, 7777}}) {
      set_num_threads(threads);
      const auto [m, k, n] = s;
      std::vector<float> x(m * k), w(n * k), y(m * n, 5.0f), y_mm(m * n, 5.0f), y_bf16(m * n, 5.0f);
      std::vector<uint16_t> w_bf16(n * k);
      for (float& e : x) e = dist(rng);
      for (float& e : w) e = bf16_to_f32(f32_to_bf16(dist(rng)));  // exact in bf16
      for (int64_t i = 0; i < n * k; ++i) w_bf16[i] = f32_to_bf16(w[i]);
      // matmul reads w as [k, n]: the transpose of the Linear layout.
      std::vector<float> w_kn(k * n);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t t = 0; t < k; ++t) w_kn[t * n + j] = w[j * k + t];
      linear(x.data(), m, k, w.data(), n, nullptr, y.data());
      matmul(x.data(), m, k, w_kn.data(), n, y_mm.data());
      linear_bf16(x.data(), m, k, w_bf16.data(), n, nullptr, y_bf16.data());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, want_bf16 = 0;  // linear_bf16 rounds its inputs to bf16
          for (int64_t t = 0; t < k; ++t) {
            want += double(x[i * k + t]) * w[j * k + t];
            want_bf16 += double(bf16_to_f32(f32_to_bf16(x[i * k + t]))) * w[j * k + t];
          }
          const double tol = 1e-4 * (1 + std::sqrt(double(k)));
          ASSERT_NEAR(y[i * n + j], want, tol) << "linear m " << m << " n " << n << " col " << j;
          ASSERT_NEAR(y_mm[i * n + j], want, tol) << "matmul m " << m << " n " << n << " col " << j;
          ASSERT_NEAR(y_bf16[i * n + j], want_bf16, tol)
              << "bf16 m " << m << " n " << n << " col " << j << " threads " << threads;
        }
    }
  set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace strata::cpu
