// cpu::linear against a double-precision reference on awkward sizes: every row count the
// decode kernel takes (1-8) and the sgemm path past it, k not a multiple of the vector width,
// odd n, with and without bias.
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"

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

// linear_bf16 against the same double-precision product over the bf16-rounded weights, at
// every instruction-set level (the ones this CPU lacks fall back to the next, still tested).
TEST(CpuLinearBf16, MatchesTheProductWithRoundedWeightsAtEveryLevel) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (Simd simd : {Simd::Best, Simd::Avx512, Simd::Avx2, Simd::Portable})
    for (int64_t m : {1, 2, 4, 7, 8, 9, 33}) {
      for (auto [k, n] :
           {std::pair<int64_t, int64_t>{1, 1}, {15, 3}, {16, 5}, {37, 129}, {300, 67}}) {
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
              want += double(x[i * k + t]) * bf16_to_f32(w[j * k + t]);
            ASSERT_NEAR(y[i * n + j], want, 1e-4 * (1 + std::sqrt(double(k))))
                << "simd " << static_cast<int>(simd) << " m " << m << " k " << k << " n " << n;
          }
      }
    }
}

}  // namespace
}  // namespace strata::cpu
