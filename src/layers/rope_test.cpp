#include "layers/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
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
    if (wavelen < 8192 / 4.0)
      expected = f;
    else if (wavelen > 8192 / 1.0)
      expected = f / 8;
    else {
      const double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * f / 8 + smooth * f;
    }
    EXPECT_NEAR(rope.inv_freq()[i], expected, 1e-6 * expected) << i;
  }
}

// YaRN as DeepSeek-V3 configures it (factor 40, original_max_position_embeddings 4096,
// beta_fast 32, beta_slow 1), on a 16-wide rotary part with base 10000, worked out by hand
// from DeepSeek's definition. The correction dimension for r rotations over the original
// context is d(r) = dim * ln(orig / (2 pi r)) / (2 ln base):
//   d(32) = 16 * ln(4096 / 201.06) / 18.4207 = 2.618 -> floor -> 2
//   d(1)  = 16 * ln(4096 / 6.2832) / 18.4207 = 5.628 -> ceil  -> 6
// Frequency pairs 0..2 keep base^(-2i/dim) (extrapolation), pairs 6..7 are divided by the
// factor (interpolation), and pairs 3, 4, 5 blend with extrapolation weights .75, .5, .25.
TEST(Rope, YarnMatchesDeepSeekDefinitionByHand) {
  RopeConfig r;
  r.type = "yarn";
  r.theta = 10000.0;
  r.factor = 40.0;
  r.original_max_position_embeddings = 4096;
  r.beta_fast = 32;
  r.beta_slow = 1;
  r.mscale = 1.0;
  r.mscale_all_dim = 1.0;
  RotaryEmbedding rope(r, 16);
  const double extrapolation[8] = {1, 1, 1, 0.75, 0.5, 0.25, 0, 0};
  for (int i = 0; i < 8; ++i) {
    const double base_freq = std::pow(10000.0, -2.0 * i / 16);
    const double expected = base_freq * (extrapolation[i] + (1 - extrapolation[i]) / 40.0);
    EXPECT_NEAR(rope.inv_freq()[i], expected, 1e-6 * expected) << i;
  }
  // cos/sin magnitude: mscale(40, 1) / mscale(40, 1) = 1 for DeepSeek-V3 (and for V2-Lite's
  // mscale = mscale_all_dim = 0.707) ...
  EXPECT_FLOAT_EQ(rope.cos_sin_scale(), 1.0f);
  r.mscale = r.mscale_all_dim = 0.707;
  EXPECT_FLOAT_EQ(RotaryEmbedding(r, 16).cos_sin_scale(), 1.0f);
  // ... and the paper's 0.1 ln(40) + 1 = 1.368888 unless both are given (transformers' rule).
  r.mscale_all_dim = 0.0;
  EXPECT_NEAR(RotaryEmbedding(r, 16).cos_sin_scale(), 1.368888, 1e-6);
  r.mscale = 0.0;
  r.mscale_all_dim = 0.707;
  EXPECT_NEAR(RotaryEmbedding(r, 16).cos_sin_scale(), 1.368888, 1e-6);
}

// DeepSeek-V3's real 64-wide rotary part: d(32) = 10.47 -> 10, d(1) = 22.51 -> 23, so the
// ramp runs linearly over pairs 10..23.
TEST(Rope, YarnRampBoundsForDeepSeekV3Width) {
  RopeConfig r;
  r.type = "yarn";
  r.theta = 10000.0;
  r.factor = 40.0;
  r.original_max_position_embeddings = 4096;
  RotaryEmbedding rope(r, 64);
  for (int i = 0; i < 32; ++i) {
    const double base_freq = std::pow(10000.0, -2.0 * i / 64);
    const double e = 1.0 - std::clamp((i - 10.0) / 13.0, 0.0, 1.0);
    const double expected = base_freq * (e + (1 - e) / 40.0);
    EXPECT_NEAR(rope.inv_freq()[i], expected, 1e-6 * expected) << i;
  }
}

// truncate: false (gpt-oss) keeps the correction range fractional: d(32) = 2.618 and
// d(1) = 5.628 (as above) bound the ramp, so pair 3 blends with extrapolation weight
// 1 - (3 - 2.618) / 3.010 = 0.873 instead of 0.75.
TEST(Rope, YarnWithoutTruncationKeepsTheFractionalRamp) {
  RopeConfig r;
  r.type = "yarn";
  r.theta = 10000.0;
  r.factor = 40.0;
  r.original_max_position_embeddings = 4096;
  r.truncate = false;
  RotaryEmbedding rope(r, 16);
  const auto d = [](double rotations) {
    return 16 * std::log(4096 / (rotations * 2 * M_PI)) / (2 * std::log(10000.0));
  };
  const double low = d(32), high = d(1);
  EXPECT_NEAR(low, 2.618, 1e-3);
  EXPECT_NEAR(high, 5.628, 1e-3);
  for (int i = 0; i < 8; ++i) {
    const double e = 1.0 - std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double base_freq = std::pow(10000.0, -2.0 * i / 16);
    const double expected = base_freq * (e + (1 - e) / 40.0);
    EXPECT_NEAR(rope.inv_freq()[i], expected, 1e-5 * expected) << i;
  }
  EXPECT_NEAR(1.0 - (3 - low) / (high - low), 0.873, 1e-3);
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

// GPT-J-style interleaved rotation (DeepSeek's layout) turns pairs (2i, 2i+1) by
// position * inv_freq[i]: with dim 4, base 10000 the pair frequencies are 1 and 0.01.
TEST(Rope, InterleavedRotatesAdjacentPairs) {
  RopeConfig r;
  RotaryEmbedding rope(r, 4, /*interleaved=*/true);
  float x[4] = {1, 0, 0, 1};
  int32_t pos = 2;
  rope.apply(x, 1, 1, 4, 4, &pos);
  EXPECT_NEAR(x[0], std::cos(2.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(2.0), 1e-6);
  EXPECT_NEAR(x[2], -std::sin(0.02), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.02), 1e-6);
}

TEST(Rope, UnknownTypeIsAClearError) {
  RopeConfig r;
  r.type = "longrope";
  EXPECT_THROW(RotaryEmbedding(r, 8), std::exception);
}

}  // namespace strata
