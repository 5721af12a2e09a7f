#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "core/error.h"

namespace strata {

TEST(Sampler, GreedyPicksTheArgmax) {
  const float logits[5] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  SamplingParams p;
  EXPECT_EQ(sample_token(logits, 5, p, 0), 1);
}

TEST(Sampler, TopKAndTopPRestrictTheCandidates) {
  const float logits[5] = {3.0f, 2.9f, 2.8f, -5.0f, -5.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.seed = 1;
  std::map<int, int> seen;
  for (int i = 0; i < 500; ++i) seen[sample_token(logits, 5, p, i)]++;
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen.count(0) && seen.count(1));
  p.top_k = 0;
  p.top_p = 0.3f;  // the top token alone holds more than 30%
  seen.clear();
  for (int i = 0; i < 200; ++i) seen[sample_token(logits, 5, p, i)]++;
  EXPECT_EQ(seen.size(), 1u);
}

TEST(Sampler, SameSeedSameTokens) {
  float logits[50];
  for (int i = 0; i < 50; ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  SamplingParams p;
  p.temperature = 0.8f;
  p.seed = 42;
  std::vector<int> first, again;
  for (int i = 0; i < 20; ++i) first.push_back(sample_token(logits, 50, p, i));
  for (int i = 0; i < 20; ++i) again.push_back(sample_token(logits, 50, p, i));
  EXPECT_EQ(first, again);
  // Another seed draws other numbers: over 20 steps among 50 tokens, some token differs.
  p.seed = 43;
  std::vector<int> other;
  for (int i = 0; i < 20; ++i) other.push_back(sample_token(logits, 50, p, i));
  EXPECT_NE(first, other);
}

// Hugging Face's RepetitionPenaltyLogitsProcessor: every token of prompt + output, once however
// often it occurs, has a positive logit divided and a negative one multiplied.
TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  float logits[6] = {2.0f, -1.0f, 3.0f, 0.5f, -2.0f, 1.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  TokenCounts counts({0, 1, 1});  // prompt: 0 once, 1 twice
  counts.add_output(4);
  counts.add_output(0);
  adjust_logits(logits, 6, p, counts, {});
  const float expected[6] = {1.0f, -2.0f, 3.0f, 0.5f, -4.0f, 1.0f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(logits[i], expected[i]) << i;
}

// OpenAI's: logit -= count * frequency_penalty + (count > 0) * presence_penalty, over the
// output only (a token only in the prompt is not penalized).
TEST(Sampler, FrequencyAndPresencePenaltiesCountOutputTokens) {
  float logits[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  TokenCounts counts({3});
  for (int t : {1, 2, 1, 1}) counts.add_output(t);
  adjust_logits(logits, 4, p, counts, {});
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f - 3 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[3], 1.0f);
  // Negative values reward repetition instead.
  p.frequency_penalty = -1.0f;
  p.presence_penalty = 0.0f;
  float again[4] = {0, 0, 0, 0};
  adjust_logits(again, 4, p, counts, {});
  EXPECT_FLOAT_EQ(again[1], 3.0f);
}

// vLLM's order: the bias first, then the penalties (so a biased logit is the one penalized).
TEST(Sampler, LogitBiasIsAddedBeforeThePenalties) {
  float logits[3] = {-1.0f, 0.0f, 0.0f};
  SamplingParams p;
  p.logit_bias = {{0, 3.0f}, {2, -100.0f}};
  p.repetition_penalty = 4.0f;
  TokenCounts counts({0});
  adjust_logits(logits, 3, p, counts, {});
  EXPECT_FLOAT_EQ(logits[0], 0.5f);  // (-1 + 3) / 4, not -1 * 4 + 3
  EXPECT_FLOAT_EQ(logits[1], 0.0f);
  EXPECT_FLOAT_EQ(logits[2], -100.0f);
  EXPECT_EQ(sample_token(logits, 3, p, 0), 0);
}

TEST(Sampler, MinNewTokensBansStopTokensUntilReached) {
  const float model[4] = {0.0f, 5.0f, 4.0f, 1.0f};  // 1 is EOS, 2 a stop token id
  SamplingParams p;
  p.min_new_tokens = 2;
  p.stop_token_ids = {2};
  TokenCounts counts({3});
  auto choose = [&] {
    float row[4];
    std::copy(model, model + 4, row);
    adjust_logits(row, 4, p, counts, {1});
    return sample_token(row, 4, p, counts.output_tokens());
  };
  EXPECT_EQ(choose(), 3);
  counts.add_output(3);
  EXPECT_EQ(choose(), 3);
  counts.add_output(3);
  EXPECT_EQ(choose(), 1);  // two out: EOS may come
  // With EOS ignored, only the stop token ids are banned.
  p.stop_at_eos = false;
  TokenCounts fresh({3});
  float row[4] = {0.0f, 5.0f, 4.0f, 1.0f};
  adjust_logits(row, 4, p, fresh, {1});
  EXPECT_FLOAT_EQ(row[1], 5.0f);
  EXPECT_TRUE(std::isinf(row[2]) && row[2] < 0);
}

// min_p keeps the tokens at least min_p times as likely as the most likely one: with logits
// ln 8, ln 4, ln 2, ln 1 at temperature 1 the probabilities are 8:4:2:1, so min_p 0.3 keeps
// the first two (4/8 >= 0.3 > 2/8).
TEST(Sampler, MinPDropsUnlikelyTokens) {
  const float logits[4] = {std::log(8.0f), std::log(4.0f), std::log(2.0f), 0.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.3f;
  p.seed = 7;
  std::map<int, int> seen;
  for (int i = 0; i < 600; ++i) seen[sample_token(logits, 4, p, i)]++;
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], seen[1]);  // 2:1
  EXPECT_GT(seen[1], 100);
}

TEST(Sampler, AdjustsOnlyWhenAControlIsSet) {
  SamplingParams p;
  EXPECT_FALSE(p.adjusts_logits());
  p.min_p = 0.5f;  // a filter of sample_token, not an adjustment
  EXPECT_FALSE(p.adjusts_logits());
  p.repetition_penalty = 1.1f;
  EXPECT_TRUE(p.adjusts_logits());
}

// The edit list the device applies: one edit per token however many controls touch it, in
// token order, on the request's row; tokens outside the vocabulary dropped; nothing at all
// for a request without controls.
TEST(Sampler, LogitEditsMergePerTokenInTokenOrder) {
  SamplingParams p;
  p.logit_bias = {{7, 2.0f}, {3, -1.0f}, {7, 0.5f}, {99, 1.0f}};
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  p.min_new_tokens = 3;
  p.stop_token_ids = {5};
  TokenCounts counts({3, 4});
  counts.add_output(7);
  counts.add_output(7);
  std::vector<LogitEdit> edits;
  append_logit_edits(edits, 2, 10, p, counts, {9});
  std::vector<int> tokens;
  for (const auto& e : edits) {
    EXPECT_EQ(e.row, 2);
    tokens.push_back(e.token);
  }
  EXPECT_EQ(tokens, (std::vector<int>{3, 4, 5, 7, 9}));
  const LogitEdit& seven = edits[3];
  EXPECT_FLOAT_EQ(seven.bias, 2.5f);
  EXPECT_FLOAT_EQ(seven.repetition, 1.5f);
  EXPECT_FLOAT_EQ(seven.shift, -1.0f);                                 // 0.5 x 2 occurrences
  EXPECT_EQ(edits[2].shift, -std::numeric_limits<float>::infinity());  // banned stop token
  EXPECT_EQ(edits[4].shift, -std::numeric_limits<float>::infinity());  // EOS
  EXPECT_FLOAT_EQ(seven.apply(3.0f), (3.0f + 2.5f) / 1.5f - 1.0f);
  EXPECT_FLOAT_EQ(seven.apply(-3.0f), (-3.0f + 2.5f) * 1.5f - 1.0f);
  std::vector<LogitEdit> none;
  append_logit_edits(none, 0, 10, SamplingParams{}, counts, {9});
  EXPECT_TRUE(none.empty());
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(p.validate(), RequestError);
  p = SamplingParams{};
  p.temperature = -1;
  EXPECT_THROW(p.validate(), RequestError);
  for (auto bad : std::vector<std::function<void(SamplingParams&)>>{
           [](SamplingParams& q) { q.presence_penalty = 2.5f; },
           [](SamplingParams& q) { q.frequency_penalty = -3.0f; },
           [](SamplingParams& q) { q.repetition_penalty = 0.0f; },
           [](SamplingParams& q) { q.min_p = 1.5f; },
           [](SamplingParams& q) { q.min_new_tokens = q.max_new_tokens + 1; },
           [](SamplingParams& q) {
             q.logit_bias = {{1, 101.0f}};
           }}) {
    p = SamplingParams{};
    bad(p);
    EXPECT_THROW(p.validate(), RequestError);
  }
}

}  // namespace strata
