#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace strata {

TEST(Sampler, GreedyPicksTheArgmax) {
  const float logits[5] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  std::mt19937_64 rng(0);
  SamplingParams p;
  EXPECT_EQ(sample_token(logits, 5, p, rng), 1);
}

TEST(Sampler, TopKAndTopPRestrictTheCandidates) {
  const float logits[5] = {3.0f, 2.9f, 2.8f, -5.0f, -5.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  std::mt19937_64 rng(1);
  std::map<int, int> seen;
  for (int i = 0; i < 500; ++i) seen[sample_token(logits, 5, p, rng)]++;
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen.count(0) && seen.count(1));
  p.top_k = 0;
  p.top_p = 0.3f;  // the top token alone holds more than 30%
  seen.clear();
  for (int i = 0; i < 200; ++i) seen[sample_token(logits, 5, p, rng)]++;
  EXPECT_EQ(seen.size(), 1u);
}

TEST(Sampler, SameSeedSameTokens) {
  float logits[50];
  for (int i = 0; i < 50; ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  SamplingParams p;
  p.temperature = 0.8f;
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(sample_token(logits, 50, p, a), sample_token(logits, 50, p, b));
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(p.validate(), RequestError);
  p = SamplingParams{};
  p.temperature = -1;
  EXPECT_THROW(p.validate(), RequestError);
}

}  // namespace strata
