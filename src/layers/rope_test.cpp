#include "layers/rope.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {

// Llama-3.1 scaling, computed by hand from Meta's definition: wavelengths longer than
// original_ctx / low_freq_factor are divided by `factor`, shorter than original_ctx /
// high_freq_factor kept, and the band between interpolated smoothly.
TEST(Rope, Llama3ScalingMatchesHandComputation) {
  RopeConfig r;
  r.type = "llama3";
  r.theta = 500000.0;
  r.factor = 8.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position_embeddings = 8192;
  RotaryEmbedding rope(r, 128);
  for (int i = 0; i < 64; ++i) {
    const double f = 1.0 / std::pow(500000.0, 2.0 * i / 128);
    const double wavelen = 2 * M_PI / f;
    double expected;
    if (wavelen < 8192 / 4.0) expected = f;
    else if (wavelen > 8192 / 1.0) expected = f / 8;
    else {
      const double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * f / 8 + smooth * f;
    }
    EXPECT_NEAR(rope.inv_freq()[i], expected, 1e-6 * expected) << i;
  }
}

TEST(Rope, RotationPreservesNormAndIsIdentityAtPositionZero) {
  RopeConfig r;
  RotaryEmbedding rope(r, 8);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float y[8];
  std::copy(x, x + 8, y);
  int32_t pos0 = 0;
  rope.apply(y, 1, 1, 8, 8, &pos0);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
  int32_t pos = 37;
  rope.apply(y, 1, 1, 8, 8, &pos);
  double n0 = 0, n1 = 0;
  for (int i = 0; i < 8; ++i) n0 += x[i] * x[i], n1 += y[i] * y[i];
  EXPECT_NEAR(n0, n1, 1e-3);
}

TEST(Rope, UnknownTypeIsAClearError) {
  RopeConfig r;
  r.type = "longrope";
  EXPECT_THROW(RotaryEmbedding(r, 8), std::exception);
}

}  // namespace strata
