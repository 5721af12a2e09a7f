// The int8 weight format and cpu::linear_int8 on awkward sizes: odd row counts on both sides
// of the 8-row chunks, k off the 64-column blocks, n off the 16-row groups, a first row inside
// a group. The portable loop is the definition; every SIMD level must compute its integers
// (equal up to f32 summation order), and the portable result must stay within the int8
// error bound of the f32 product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_weights.h"

namespace strata::cpu {
namespace {

// A [n, k] matrix packed group by group.
std::vector<uint8_t> pack(const std::vector<float>& w, int64_t n, int64_t k) {
  std::vector<uint8_t> packed(storage_bytes(DType::Q8, n, k));
  for (int64_t g = 0; g < int8::groups(n); ++g)
    int8::quantize_group(w.data() + g * int8::kGroupRows * k,
                         std::min(int8::kGroupRows, n - g * int8::kGroupRows), k,
                         packed.data() + g * int8::group_bytes(k));
  return packed;
}

TEST(Int8Weights, RowsComeBackWithinHalfAStepOfTheirBlock) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {17, 63}, {16, 64}, {33, 130}}) {
    std::vector<float> w(n * k);
    for (float& e : w) e = dist(rng);
    w[0] = 0.0f;  // a zero still comes back as zero
    const std::vector<uint8_t> packed = pack(w, n, k);
    std::vector<float> row(k);
    for (int64_t r = 0; r < n; ++r) {
      int8::dequantize_row(packed.data(), k, r, row.data());
      for (int64_t c = 0; c < k; ++c) {
        float amax = 0.0f;  // of the row's block holding c
        for (int64_t t = c / 64 * 64; t < std::min(k, c / 64 * 64 + 64); ++t)
          amax = std::max(amax, std::fabs(w[r * k + t]));
        ASSERT_LE(std::fabs(row[c] - w[r * k + c]), amax / 254.0f * 1.0001f)
            << "n " << n << " k " << k << " row " << r << " col " << c;
      }
    }
    int8::dequantize_row(packed.data(), k, 0, row.data());
    EXPECT_EQ(row[0], 0.0f);
  }
}

TEST(CpuLinearInt8, EveryLevelComputesThePortableProduct) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Shape {
    int64_t k, n, row0;
  };
  for (int64_t m : {1, 2, 3, 7, 8, 9, 17, 33, 150})
    for (Shape s : {Shape{1, 1, 0}, Shape{63, 17, 0}, Shape{64, 16, 16}, Shape{65, 3, 5},
                    Shape{200, 33, 7}, Shape{300, 67, 0},
                    // Enough groups that 1-2 row decode pairs groups of two runs per thread,
                    // starting and ending inside a group.
                    Shape{130, 517, 5}}) {
      const int64_t total = s.row0 + s.n + 3;  // rows of the packed matrix
      std::vector<float> x(m * s.k), w(total * s.k), bias(s.n);
      for (auto* v : {&x, &w, &bias})
        for (float& e : *v) e = dist(rng);
      const std::vector<uint8_t> packed = pack(w, total, s.k);
      std::vector<float> want(m * s.n, 123.0f);
      linear_int8(x.data(), m, s.k, packed.data(), s.row0, s.n, bias.data(), want.data(),
                  Simd::Portable);
      // The portable product against the f32 one: each weight and activation is off by at
      // most half a step (max |block| / 254), ~0.0019 sqrt(k) in all for these uniform
      // values; 1.5 sqrt(k) * 2 / 254 is ~6 sigma.
      const double tol = 1.5 * std::sqrt(double(s.k)) * 2.0 / 254.0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double ref = bias[j];
          for (int64_t t = 0; t < s.k; ++t)
            ref += double(x[i * s.k + t]) * w[(s.row0 + j) * s.k + t];
          ASSERT_NEAR(want[i * s.n + j], ref, tol)
              << "m " << m << " k " << s.k << " n " << s.n << " row0 " << s.row0;
        }
      for (Simd simd : {Simd::Best, Simd::Amx, Simd::Avx512, Simd::Avx2}) {
        std::vector<float> got(m * s.n, -7.0f);
        linear_int8(x.data(), m, s.k, packed.data(), s.row0, s.n, bias.data(), got.data(), simd);
        for (int64_t i = 0; i < m * s.n; ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
              << "simd " << static_cast<int>(simd) << " m " << m << " k " << s.k << " n " << s.n
              << " row0 " << s.row0 << " element " << i;
      }
    }
}

// The AMX-INT8 prefill kernel computes the same integers as VNNI's and scales and sums them
// with the same operations in the same order, so the two are equal bit for bit (on a CPU
// without AMX, Simd::Amx falls back to VNNI and this holds trivially); and a decode row's
// product does not depend on its batch (1-8 rows), at every SIMD level.
TEST(CpuLinearInt8, AmxEqualsVnniAndRowsAreBatchInvariant) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto [k, n] : {std::pair<int64_t, int64_t>{64, 16}, {300, 67}, {1000, 130}}) {
    const int64_t m = 150;
    std::vector<float> x(m * k), w(n * k), bias(n);
    for (auto* v : {&x, &w, &bias})
      for (float& e : *v) e = dist(rng);
    const std::vector<uint8_t> packed = pack(w, n, k);
    auto product = [&](Simd simd, const float* rows, int64_t count) {
      std::vector<float> y(count * n);
      linear_int8(rows, count, k, packed.data(), 0, n, bias.data(), y.data(), simd);
      return y;
    };
    for (int64_t rows : {9, 16, 17, 150})
      ASSERT_EQ(product(Simd::Amx, x.data(), rows), product(Simd::Avx512, x.data(), rows))
          << "k " << k << " n " << n << " rows " << rows;
    for (Simd simd : {Simd::Avx512, Simd::Avx2})
      for (int64_t rows = 2; rows <= 8; ++rows) {
        const std::vector<float> batch = product(simd, x.data(), rows);
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<float> alone = product(simd, x.data() + r * k, 1);
          for (int64_t j = 0; j < n; ++j)
            ASSERT_EQ(batch[r * n + j], alone[j]) << "simd " << static_cast<int>(simd) << " k " << k
                                                  << " rows " << rows << " row " << r;
        }
      }
  }
}

}  // namespace
}  // namespace strata::cpu
