// The serving pipeline's step message (pipeline_relay.h): every field of a ServeRequest and its
// SamplingParams survives the trip to a follower stage, and a field added to either struct
// without being carried fails here instead of being dropped silently under --pp-size.
#include "server/pipeline_relay.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

// Counts an aggregate's fields: the most initializers `T{...}` takes (Boost.PFR's method).
struct AnyField {
  template <typename T>
  operator T() const;  // never defined: only used in unevaluated braces
};
template <typename T, typename... Fields>
constexpr int field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; })
    return field_count<T, Fields..., AnyField>();
  else
    return static_cast<int>(sizeof...(Fields));
}

// Every field away from its default, each to a value of its own.
ServeRequest unusual_request() {
  ServeRequest r;
  r.input_ids = {5, 9, 2};
  r.top_logprobs = 3;
  r.stop_strings = {"\n\n", "END"};
  r.skip_special_tokens = false;
  r.return_logits = true;
  r.prompt_logprobs_from = 1;
  r.prompt_top_logprobs = 2;
  SamplingParams& p = r.sampling;
  p.temperature = 0.75f;
  p.top_k = 7;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = -0.5f;
  p.repetition_penalty = 1.3f;
  p.min_new_tokens = 4;
  p.logit_bias = {{3, -2.5f}, {11, 100.0f}};
  p.seed = 123456789012345ull;
  p.max_new_tokens = 33;
  p.stop_at_eos = false;
  p.stop_token_ids = {8, 13};
  return r;
}

TEST(PipelineRelay, StepMessageCarriesEveryRequestField) {
  // A new field must be added to encode_request / decode_request (pipeline_relay.cpp) and to
  // unusual_request() and the comparisons below; then update these counts.
  static_assert(field_count<SamplingParams>() == 13, "SamplingParams gained or lost a field");
  static_assert(field_count<ServeRequest>() == 9, "ServeRequest gained or lost a field");
  StepInputs in;
  in.submits.emplace_back(42, unusual_request());
  in.submits.emplace_back(7, ServeRequest{});
  in.aborts = {3, 42};
  in.flush_cache = true;
  const StepInputs out = decode_step(encode_step(in));
  ASSERT_EQ(out.submits.size(), 2u);
  EXPECT_EQ(out.submits[0].first, 42u);
  EXPECT_EQ(out.submits[1].first, 7u);
  EXPECT_EQ(out.aborts, in.aborts);
  EXPECT_TRUE(out.flush_cache);
  for (size_t i = 0; i < 2; ++i) {
    const ServeRequest& a = in.submits[i].second;
    const ServeRequest& b = out.submits[i].second;
    EXPECT_EQ(b.input_ids, a.input_ids);
    EXPECT_EQ(b.top_logprobs, a.top_logprobs);
    EXPECT_EQ(b.stop_strings, a.stop_strings);
    EXPECT_EQ(b.skip_special_tokens, a.skip_special_tokens);
    EXPECT_EQ(b.return_logits, a.return_logits);
    EXPECT_EQ(b.prompt_logprobs_from, a.prompt_logprobs_from);
    EXPECT_EQ(b.prompt_top_logprobs, a.prompt_top_logprobs);
    EXPECT_EQ(b.grammar, nullptr);  // refused under a pipeline, never carried
    const SamplingParams &p = a.sampling, &q = b.sampling;
    EXPECT_EQ(q.temperature, p.temperature);
    EXPECT_EQ(q.top_k, p.top_k);
    EXPECT_EQ(q.top_p, p.top_p);
    EXPECT_EQ(q.min_p, p.min_p);
    EXPECT_EQ(q.presence_penalty, p.presence_penalty);
    EXPECT_EQ(q.frequency_penalty, p.frequency_penalty);
    EXPECT_EQ(q.repetition_penalty, p.repetition_penalty);
    EXPECT_EQ(q.min_new_tokens, p.min_new_tokens);
    EXPECT_EQ(q.logit_bias, p.logit_bias);
    EXPECT_EQ(q.seed, p.seed);
    EXPECT_EQ(q.max_new_tokens, p.max_new_tokens);
    EXPECT_EQ(q.stop_at_eos, p.stop_at_eos);
    EXPECT_EQ(q.stop_token_ids, p.stop_token_ids);
  }
}

}  // namespace
}  // namespace strata
