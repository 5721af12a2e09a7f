#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {

TEST(DType, Bf16RoundTripIsExactForRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 0.15625f, 65280.0f}) EXPECT_EQ(bf16_to_f32(f32_to_bf16(v)), v);
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(DType, F16Decodes) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
}

}  // namespace strata
