// The golden fixtures with reduced-precision weights, against the same transformers references
// as golden_dense_test.cpp and golden_hybrid_test.cpp: on the GPU (--device cuda), dense and
// hybrid, whose path keeps weights, GEMM inputs and the KV cache in bf16 (f32 accumulation, f32
// residual stream), on the CPU with --dtype bfloat16 (bf16 weights and product inputs; sums,
// the residual stream and the KV cache stay f32) and on the CPU with --quantization int8 (int8
// weights, the inputs of every product quantized to int8 per row and 64 columns; sums, the residual
// stream and the KV cache f32). Each matches within its format's tolerance, not the CPU reference's
// 1e-3:
//   max |logit - reference| <= tolerance_share(fixture) * std(reference logits)
// (golden_suite.cpp: the shares, and the prompts a router flip leaves out, with their
// measurements).
// Greedy ids must equal the reference at every step whose reference margin (top-1 minus
// top-2 logit) exceeds twice that tolerance; after a closer call the continuation may
// legitimately differ, so the comparison of that prompt stops there.
// The GPU half skips with a visible message where there is no GPU or no CUDA build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "golden_suite.h"

namespace strata::test {

namespace {

double logits_std(const Tensor& t) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    sum += t.data()[i], sq += double(t.data()[i]) * t.data()[i];
  const double mean = sum / t.numel();
  return std::sqrt(std::max(0.0, sq / t.numel() - mean * mean));
}

double margin(const float* row, int vocab) {
  std::vector<float> v(row, row + vocab);
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  return v[0] - v[1];
}

// The checks, shared by every format; each derived fixture picks its runner options.
class GoldenReducedPrecision : public testing::TestWithParam<GoldenCase> {
 protected:
  void start(const std::string& device, const std::string& dtype,
             const std::string& quantization = "none") {
    ref_ = load_reference(golden_reference_fixture(GetParam().fixture));
    config_ = ModelConfig::load(golden_model_dir(GetParam().fixture));
    RunnerOptions o = default_options(GetParam().page_size);
    o.device = device;
    o.dtype = dtype;
    o.quantization = quantization;
    runner_ = std::make_unique<ModelRunner>(config_, o);
    int8_ = quantization != "none";
    const double share =
        int8_ ? int8_tolerance_share(GetParam().fixture) : bf16_tolerance_share(GetParam().fixture);
    tolerance_ = share * logits_std(ref_.logits.back());
    tag_ = int8_ ? "cpu int8" : device == "cuda" ? "cuda" : "cpu bf16";
  }
  bool prefill_compared(size_t prompt) const {
    return int8_ ? int8_prefill_compared(GetParam().fixture, prompt)
                 : bf16_prefill_compared(GetParam().fixture, prompt);
  }
  int greedy_steps_compared(size_t prompt) const {
    if (int8_) return int8_greedy_steps_compared(GetParam().fixture, prompt);
    return tag_ == "cuda" ? bf16_greedy_steps_compared(GetParam().fixture, prompt)
                          : cpu_bf16_greedy_steps_compared(GetParam().fixture, prompt);
  }
  void check_prefill_logits();
  void check_greedy_ids();
  void check_chunked_prefill();
  Reference ref_;
  ModelConfig config_;
  std::unique_ptr<ModelRunner> runner_;
  double tolerance_ = 0;
  bool int8_ = false;
  std::string tag_;
};

class GoldenCuda : public GoldenReducedPrecision {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
    start("cuda", "auto");
  }
};

class GoldenCpuBf16 : public GoldenReducedPrecision {
 protected:
  void SetUp() override { start("cpu", "bfloat16"); }
};

class GoldenCpuInt8 : public GoldenReducedPrecision {
 protected:
  void SetUp() override { start("cpu", "auto", "int8"); }
};

}  // namespace

void GoldenReducedPrecision::check_prefill_logits() {
  for (size_t i = 0; i < ref_.input_ids.size(); ++i) {
    if (!prefill_compared(i)) continue;
    const Tensor logits = prefill_all_logits(*runner_, ref_.input_ids[i]);
    const double err = max_abs_diff(logits, ref_.logits[i]);
    std::printf("[ %-8s ] %s prompt %zu (%zu tokens): max |logit error| %.4g (tolerance %.4g)\n",
                tag_.c_str(), GetParam().fixture.c_str(), i, ref_.input_ids[i].size(), err,
                tolerance_);
    EXPECT_LE(err, tolerance_) << "prompt " << i;
  }
}

void GoldenReducedPrecision::check_greedy_ids() {
  const int vocab = config_.vocab_size;
  const auto with_logits = greedy(*runner_, ref_.input_ids, 10, true);
  const auto argmax_on_gpu = greedy(*runner_, ref_.input_ids, 10, false);
  for (size_t i = 0; i < ref_.input_ids.size(); ++i) {
    // The device argmax and the host sampler pick the same tokens from the same pass.
    EXPECT_EQ(argmax_on_gpu[i].output_ids, with_logits[i].output_ids) << "prompt " << i;
    int checked = 0;
    // Step s is compared while every earlier token equals the reference (same inputs).
    const int steps = greedy_steps_compared(i);
    for (int s = 0; s < (steps < 0 ? 10 : steps); ++s) {
      EXPECT_LE(max_abs_diff(with_logits[i].logits[s].data(), ref_.greedy_logits[i].row(s), vocab),
                tolerance_)
          << "prompt " << i << " step " << s;
      if (margin(ref_.greedy_logits[i].row(s), vocab) <= 2 * tolerance_)
        break;  // a near tie: either pick is right
      ++checked;
      EXPECT_EQ(with_logits[i].output_ids[s], ref_.greedy_ids[i][s])
          << "prompt " << i << " step " << s;
      if (with_logits[i].output_ids[s] != ref_.greedy_ids[i][s]) break;
    }
    std::printf("[ %-8s ] %s prompt %zu: %d greedy steps compared\n", tag_.c_str(),
                GetParam().fixture.c_str(), i, checked);
  }
}

void GoldenReducedPrecision::check_chunked_prefill() {
  const int prompt = routing_stable_prompt(ref_);
  if (prompt < 0) GTEST_SKIP() << "every prompt of more than one token has a routing near-tie";
  const auto& ids = ref_.input_ids.at(prompt);
  const Tensor whole = prefill_all_logits(*runner_, ids);
  for (int chunk : {1, 5, 16}) {
    const Tensor chunked = prefill_all_logits(*runner_, ids, chunk);
    EXPECT_LE(max_abs_diff(whole, chunked), tolerance_) << "chunk " << chunk;
  }
}

TEST_P(GoldenCuda, PrefillLogitsWithinBf16Tolerance) {
  check_prefill_logits();
}
TEST_P(GoldenCuda, GreedyIdsMatchWhereTheMarginAllows) {
  check_greedy_ids();
}
TEST_P(GoldenCuda, ChunkedPrefillAgreesWithWholePrefill) {
  check_chunked_prefill();
}
TEST_P(GoldenCpuBf16, PrefillLogitsWithinBf16Tolerance) {
  check_prefill_logits();
}
TEST_P(GoldenCpuBf16, GreedyIdsMatchWhereTheMarginAllows) {
  check_greedy_ids();
}
TEST_P(GoldenCpuBf16, ChunkedPrefillAgreesWithWholePrefill) {
  check_chunked_prefill();
}
TEST_P(GoldenCpuInt8, PrefillLogitsWithinInt8Tolerance) {
  check_prefill_logits();
}
TEST_P(GoldenCpuInt8, GreedyIdsMatchWhereTheMarginAllows) {
  check_greedy_ids();
}
TEST_P(GoldenCpuInt8, ChunkedPrefillAgreesWithWholePrefill) {
  check_chunked_prefill();
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, GoldenCuda,
    testing::Values(GoldenCase{"llama", 1}, GoldenCase{"llama", 16}, GoldenCase{"llama3_rope", 1},
                    GoldenCase{"llama_bf16", 16}, GoldenCase{"qwen2", 1}, GoldenCase{"qwen2", 16},
                    GoldenCase{"qwen3", 1}, GoldenCase{"mistral_swa", 1},
                    GoldenCase{"mistral_swa", 16}, GoldenCase{"deepseek_v2_lite", 1},
                    GoldenCase{"deepseek_v2_lite", 16}, GoldenCase{"deepseek_v3", 1},
                    GoldenCase{"gemma3", 1}, GoldenCase{"gemma3", 16}, GoldenCase{"gpt_oss", 1},
                    GoldenCase{"gpt_oss", 16}),
    golden_case_name);

// The hybrids: Mamba2 layers through the same model files (the recurrent ops on the GPU, the
// state pool in device memory), MoE blocks of NemotronH, Falcon-H1's parallel mixers.
INSTANTIATE_TEST_SUITE_P(
    Hybrids, GoldenCuda,
    testing::Values(GoldenCase{"nemotron_h", 1}, GoldenCase{"nemotron_h", 16},
                    GoldenCase{"nemotron_h_mamba_only", 1}, GoldenCase{"nemotron_h_moe", 1},
                    GoldenCase{"nemotron_h_moe", 16}, GoldenCase{"nemotron_h_moe_hub_config", 1},
                    GoldenCase{"bamba", 1}, GoldenCase{"bamba", 16}, GoldenCase{"falcon_h1", 1},
                    GoldenCase{"falcon_h1", 16}, GoldenCase{"lfm2", 1}, GoldenCase{"lfm2", 16},
                    GoldenCase{"qwen3_next", 1}, GoldenCase{"qwen3_next", 16}),
    golden_case_name);

// Every fixture with bf16 or int8 weights on the CPU, at page size 1 (paging is the f32
// suites' invariance; the weights' dtype does not touch it).
std::vector<GoldenCase> cpu_cases() {
  std::vector<GoldenCase> cases;
  for (const char* f : {"llama", "llama3_rope", "llama_bf16", "qwen2", "qwen3", "mistral_swa",
                        "deepseek_v2_lite", "deepseek_v3", "gemma3", "gpt_oss", "nemotron_h",
                        "nemotron_h_moe", "bamba", "falcon_h1", "lfm2", "qwen3_next"})
    cases.push_back({f, 1});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenCpuBf16, testing::ValuesIn(cpu_cases()), golden_case_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenCpuInt8, testing::ValuesIn(cpu_cases()), golden_case_name);

}  // namespace strata::test
