#include "layers/mla_attention.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {

// DeepSeek's softmax scale, by hand: 1/sqrt(192) = 0.0721688; under YaRN with factor 40 it is
// multiplied by mscale^2 with mscale = 0.1 * mscale_all_dim * ln(40) + 1:
//   DeepSeek-V3     (mscale_all_dim 1):     1.368888^2 = 1.873855 -> 0.1352338
//   DeepSeek-V2-Lite (mscale_all_dim 0.707): 1.260804^2 = 1.589627 -> 0.1147214
TEST(MlaSoftmaxScale, YarnMscaleSquaredAsDeepSeekDefinesIt) {
  RopeConfig r;
  EXPECT_NEAR(mla_softmax_scale(192, r), 1.0 / std::sqrt(192.0), 1e-7);
  r.type = "yarn";
  r.factor = 40.0;
  r.original_max_position_embeddings = 4096;
  r.mscale = 1.0;
  r.mscale_all_dim = 1.0;
  EXPECT_NEAR(mla_softmax_scale(192, r), 0.1352338, 1e-6);
  r.mscale = r.mscale_all_dim = 0.707;
  EXPECT_NEAR(mla_softmax_scale(192, r), 0.1147214, 1e-6);
  r.mscale_all_dim = 0.0;  // no mscale_all_dim: no correction
  EXPECT_NEAR(mla_softmax_scale(192, r), 1.0 / std::sqrt(192.0), 1e-7);
}

}  // namespace strata
