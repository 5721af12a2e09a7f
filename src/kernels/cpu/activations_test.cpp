// SiLU on the CPU (activations.cpp): exp_approx within 2 ulp of the exponential over its whole
// range, and silu_and_mul, whichever instruction set it runs on, bit-equal to the one-value-at-
// a-time silu that a CPU without AVX-512 computes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"

namespace strata::cpu {
namespace {

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(int64_t{ia} - int64_t{ib});
}

TEST(CpuActivations, ExpIsWithinTwoUlpOverItsRange) {
  int64_t worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, ulps(exp_approx(x), want));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_EQ(exp_approx(-1000.0f), 0.0f);  // clamped: e^-88.38 and below is 0
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
  EXPECT_GT(exp_approx(1000.0f), 1e38f);
}

TEST(CpuActivations, SiluAndMulIsTheScalarSiluBitForBit) {
  // Widths with and without a partial last vector; gates over the exponential's whole range,
  // the clamped ends included.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> gate(-100.0f, 100.0f), up(-2.0f, 2.0f);
  for (int64_t width : {1, 15, 16, 17, 5632}) {
    const int64_t rows = 3;
    std::vector<float> gate_up(rows * 2 * width), out(rows * width);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < width; ++i) {
        gate_up[r * 2 * width + i] = i % 7 == 0 ? gate(rng) : gate(rng) / 20.0f;
        gate_up[r * 2 * width + width + i] = up(rng);
      }
    silu_and_mul(gate_up.data(), rows, width, out.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < width; ++i) {
        const float g = gate_up[r * 2 * width + i], u = gate_up[r * 2 * width + width + i];
        ASSERT_EQ(out[r * width + i], silu(g) * u) << "width " << width << " at " << i;
        const double exact = g / (1.0 + std::exp(-double(g))) * u;
        ASSERT_NEAR(out[r * width + i], exact, 1e-6 * std::abs(exact) + 1e-30) << g;
      }
  }
}

}  // namespace
}  // namespace strata::cpu
