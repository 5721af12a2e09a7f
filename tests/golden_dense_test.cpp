// Golden tests against Hugging Face transformers for the dense families, plus the
// invariances every architecture must keep: batched = single, page size 16 = page size 1,
// chunked prefill = one prefill, prefix-cached = uncached, prefill + decode = full recompute (the
// reference's greedy logits were computed without a KV cache).
#include <gtest/gtest.h>

#include "golden_suite.h"

namespace strata::test {

namespace {

class DenseGolden : public GoldenTest {};
// Prefix caching for the families whose attention is windowed or has sinks (the server tests
// cover plain Llama).
class DenseGoldenCached : public GoldenTest {};

}  // namespace

TEST_P(DenseGolden, PrefillLogitsMatchReference) {
  check_prefill_logits();
}

TEST_P(DenseGolden, GreedyBatchedAndSingleMatchReference) {
  check_greedy_batched_and_single();
}

TEST_P(DenseGolden, ChunkedPrefillEqualsWholePrefill) {
  check_chunked_prefill_equals_whole();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenseGolden,
                         testing::ValuesIn(golden_cases({"llama", "llama3_rope", "llama_bf16",
                                                         "qwen2", "qwen3", "mistral_swa", "gemma3",
                                                         "gpt_oss"})),
                         golden_case_name);

TEST_P(DenseGoldenCached, PrefixCachedEqualsUncached) {
  check_prefix_cached_equals_uncached();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenseGoldenCached,
                         testing::ValuesIn(golden_cases({"mistral_swa", "gemma3", "gpt_oss"})),
                         golden_case_name);

// Without the emulation the bf16 model still chooses the same tokens; logits differ by the
// rounding of the rotary frequencies (~5e-3 at position 55).
TEST(DenseGoldenBf16, F32RopeFrequenciesKeepGreedyIds) {
  const Reference ref = load_reference("llama_bf16");
  ModelRunner runner(ModelConfig::load(fixture_dir("llama_bf16")), default_options());
  const auto out = greedy(runner, ref.input_ids, 10, false);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].output_ids, ref.greedy_ids[i]);
}

}  // namespace strata::test
