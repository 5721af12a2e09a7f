// Golden tests against Hugging Face transformers for the dense families, plus the
// invariances every architecture must keep: batched = single, page size 16 = page size 1,
// chunked prefill = one prefill, prefill + decode = full recompute (the reference's greedy
// logits were computed without a KV cache).
#include <gtest/gtest.h>

#include "test_util.h"

namespace strata::test {

namespace {

struct Case {
  std::string fixture;
  int page_size;
  friend void PrintTo(const Case& c, std::ostream* os) {
    *os << c.fixture << "/page" << c.page_size;
  }
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return info.param.fixture + "_page" + std::to_string(info.param.page_size);
}

class DenseGolden : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ref_ = load_reference(GetParam().fixture);
    RunnerOptions o = default_options(GetParam().page_size);
    config_ = ModelConfig::load(fixture_dir(GetParam().fixture));
    // The bf16 fixture's reference ran after `model.to(bfloat16)`, which also rounded the
    // RoPE frequency buffer to bf16; compare like with like (see tests/data/README.md).
    if (GetParam().fixture == "llama_bf16") config_.rope.inv_freq_dtype = "bf16";
    runner_ = std::make_unique<ModelRunner>(config_, o);
  }
  Reference ref_;
  ModelConfig config_;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace

TEST_P(DenseGolden, PrefillLogitsMatchReference) {
  for (size_t i = 0; i < ref_.input_ids.size(); ++i) {
    Tensor logits = prefill_all_logits(*runner_, ref_.input_ids[i]);
    EXPECT_LE(max_abs_diff(logits, ref_.logits[i]), 1e-3) << "prompt " << i;
  }
}

TEST_P(DenseGolden, GreedyBatchedAndSingleMatchReference) {
  const auto batched = greedy(*runner_, ref_.input_ids, 10);
  for (size_t i = 0; i < ref_.input_ids.size(); ++i) {
    const auto single = greedy(*runner_, {ref_.input_ids[i]}, 10);
    EXPECT_EQ(batched[i].output_ids, ref_.greedy_ids[i]) << "batched, prompt " << i;
    EXPECT_EQ(single[0].output_ids, ref_.greedy_ids[i]) << "single, prompt " << i;
    const int vocab = config_.vocab_size;
    for (int s = 0; s < 10; ++s) {
      EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), ref_.greedy_logits[i].row(s), vocab),
                1e-3)
          << "prompt " << i << " step " << s;
      EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), single[0].logits[s].data(), vocab), 1e-4);
    }
  }
}

TEST_P(DenseGolden, ChunkedPrefillEqualsWholePrefill) {
  const auto& ids = ref_.input_ids.back();
  const Tensor whole = prefill_all_logits(*runner_, ids);
  for (int chunk : {1, 5, 16}) {
    const Tensor chunked = prefill_all_logits(*runner_, ids, chunk);
    EXPECT_LE(max_abs_diff(whole, chunked), 1e-4) << "chunk " << chunk;
  }
  const auto a = greedy(*runner_, ref_.input_ids, 6, false);
  const auto b = greedy(*runner_, ref_.input_ids, 6, false, 5);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].output_ids, b[i].output_ids);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenseGolden,
                         testing::Values(Case{"llama", 1}, Case{"llama", 16},
                                         Case{"llama3_rope", 1}, Case{"llama3_rope", 16},
                                         Case{"llama_bf16", 1}, Case{"llama_bf16", 16},
                                         Case{"qwen2", 1}, Case{"qwen2", 16}, Case{"qwen3", 1},
                                         Case{"qwen3", 16}, Case{"mistral_swa", 1},
                                         Case{"mistral_swa", 16}),
                         case_name);

// Without the emulation the bf16 model still chooses the same tokens; logits differ by the
// rounding of the rotary frequencies (~5e-3 at position 55).
TEST(DenseGoldenBf16, F32RopeFrequenciesKeepGreedyIds) {
  const Reference ref = load_reference("llama_bf16");
  ModelRunner runner(ModelConfig::load(fixture_dir("llama_bf16")), default_options());
  const auto out = greedy(runner, ref.input_ids, 10, false);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].output_ids, ref.greedy_ids[i]);
}

}  // namespace strata::test
