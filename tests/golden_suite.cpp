#include "golden_suite.h"

#include <filesystem>

#include "runtime/scheduler.h"
#include "runtime/scheduler_test_util.h"

namespace strata::test {

// Tolerances: logits against transformers (f32 on both sides; different summation orders),
// and between two strata runs that must agree (batched vs single, chunked vs whole).
constexpr double kReferenceTolerance = 1e-3;
constexpr double kInvarianceTolerance = 1e-4;
constexpr int kGreedySteps = 10;

// bf16 keeps 8 significant bits: each rounding moves a value by up to 2^-9 = 0.2%, and the
// fixtures' f32 weights are rounded too. Measured on the H200 (2026-11-30), as a share of the
// spread: 2.2% for llama_bf16 (bf16-exact weights), 3.6-4.6% for the f32-weight fixtures (worst
// qwen3). 6% keeps a margin over that without hiding a real bug, which shows up as errors of
// the order of the spread itself.
// qwen3_next is more sensitive: its Gated DeltaNet layers carry the state through products of
// decays and l2-normalized keys, and transformers' own bf16 forward on the GPU misses its f32
// reference by 11.7% of the spread on prompt 1's prefill (0.263 of 2.25) and by 0.10-0.46
// (up to 20%) on the greedy steps where no expert choice flips (tools/bf16_sensitivity.py on
// the H200, 2026-12-03). strata's GPU misses the prefill by 10.5% at most, and 12% holds it on
// every compared step of the GPU goldens and invariances (same run); transformers' error is
// the bar the share is rounded from.
double bf16_tolerance_share(const std::string& fixture) {
  return fixture == "qwen3_next" ? 0.12 : 0.06;
}

// deepseek_v3, prompts 2 and 3: rounding only the router's input to bf16 on the CPU moves prompt
// 3's logits by 2.75 (measured 2026-12-01; the GPU's error there is 2.71). nemotron_h_moe,
// prompt 2: the same experiment moves its logits by 3.497 (measured 2026-12-02; the GPU's error
// is 3.484). Both routers run in f32 on the GPU too (as in transformers); the flip comes from
// the bf16 activations before them. gpt_oss, prompt 3: its f32 router logits have a top-2 margin
// of 1.5e-4 there, and transformers' own bf16 forward on the GPU misses the reference by 3.82
// on it (tools/bf16_sensitivity.py, 2026-12-02; strata's GPU error is 1.63, every other
// prompt within 0.06). qwen3_next, prompt 2: its f32 router margin falls to 1.15e-3 and
// transformers' bf16 forward misses its prefill by 2.94 (strata's GPU: 3.01) and its seventh
// greedy step by 1.28; on prompt 3 transformers misses by 2.57 where strata stays within
// 0.24, so that prompt is compared.
bool bf16_prefill_compared(const std::string& fixture, size_t prompt) {
  if (fixture == "deepseek_v3") return prompt < 2;
  if (fixture == "gpt_oss") return prompt != 3;
  if (fixture == "nemotron_h_moe" || fixture == "nemotron_h_moe_hub_config") return prompt != 2;
  if (fixture == "qwen3_next") return prompt != 2;
  return true;
}

// nemotron_h_moe's prompt 1 changes experts at its third step on the GPU (logit error 4.68, the
// size of the flip above, where bf16 rounding gives 0.05-0.07); rounding the router input alone
// on the CPU does not reproduce it, so its cause is the bf16 activations upstream.
int bf16_greedy_steps_compared(const std::string& fixture, size_t prompt) {
  if ((fixture == "nemotron_h_moe" || fixture == "nemotron_h_moe_hub_config") && prompt == 1)
    return 2;
  if (fixture == "qwen3_next" && prompt == 2) return 0;
  return -1;
}

// The CPU's bf16 rounds the inputs of every product but keeps the KV cache and everything else
// f32, so its experts flip at other steps than the GPU's. Measured 2026-12-07 (logit error
// against the reference, per greedy step): deepseek_v3 prompt 1 keeps 0.027-0.054 through step
// 7 and jumps to 1.66 at step 8; gpt_oss prompt 0 keeps 0.022-0.033 through step 4 and jumps to
// 2.28 at step 5. Both are the size of a changed expert choice. deepseek_v3 prompt 2, whose
// prefill the list above leaves out (its router sits within bf16 rounding), runs 0.10-0.14 at
// every step against 0.03 on its other prompts; its greedy steps are left out with its prefill.
int cpu_bf16_greedy_steps_compared(const std::string& fixture, size_t prompt) {
  if (!bf16_prefill_compared(fixture, prompt)) return 0;
  if (fixture == "deepseek_v3" && prompt == 1) return 8;
  if (fixture == "gpt_oss" && prompt == 0) return 5;
  return bf16_greedy_steps_compared(fixture, prompt);
}

// int8 (--quantization int8): weights and the inputs of every product are each rounded to
// 1/254 of their 64-column block's largest magnitude, several times bf16's step for the small
// values of a block, and the activations are rounded on the same coarser grid.
// Measured on the CPU (2026-12-03, the commit that added int8), as a share of the spread over
// every prefill of the dense and hybrid fixtures: 6-15% on most prompts, 20-27% on a few
// (bamba 20%, gemma3 22%, deepseek_v2_lite 25%, lfm2 27%): these fixtures are random-weight
// models of 64-128 columns, a few blocks per row, where one large activation coarsens its
// whole block. 0.3 holds them with a margin; a real bug gives errors of the order of the
// spread itself. (The trained tiny-en model's perplexity moves by 0.2%: tiny_model_test.cpp.)
double int8_tolerance_share(const std::string&) {
  return 0.3;
}

// The MoE fixtures' prompts past that (prefill error as a share of the spread): deepseek_v3
// prompt 1 (79%), gpt_oss prompt 2 (66%), nemotron_h_moe prompts 1 and 3 (297%, 162%),
// qwen3_next prompts 1 and 3 (90%, 214%), on top of the ones bf16 leaves out. Their other
// prompts stay within 0.1-0.24, as the dense fixtures do, and their routers run in f32: the
// size of the jump is that of a changed expert choice (as measured for bf16 above), though
// which expert flips was not traced for int8.
bool int8_prefill_compared(const std::string& fixture, size_t prompt) {
  if (fixture == "deepseek_v3" && prompt == 1) return false;
  if (fixture == "gpt_oss" && prompt == 2) return false;
  if ((fixture == "nemotron_h_moe" || fixture == "nemotron_h_moe_hub_config") &&
      (prompt == 1 || prompt == 3))
    return false;
  if (fixture == "qwen3_next" && (prompt == 1 || prompt == 3)) return false;
  return bf16_prefill_compared(fixture, prompt);
}

int int8_greedy_steps_compared(const std::string& fixture, size_t prompt) {
  if (!int8_prefill_compared(fixture, prompt)) return 0;
  return bf16_greedy_steps_compared(fixture, prompt);
}

std::string golden_case_name(const testing::TestParamInfo<GoldenCase>& info) {
  return info.param.fixture + "_page" + std::to_string(info.param.page_size);
}

std::vector<GoldenCase> golden_cases(const std::vector<std::string>& fixtures) {
  std::vector<GoldenCase> cases;
  for (const auto& f : fixtures)
    for (int page : {1, 16}) cases.push_back({f, page});
  return cases;
}

void GoldenTest::SetUp() {
  ref_ = load_reference(reference_fixture());
  config_ = ModelConfig::load(model_dir());
  runner_ = std::make_unique<ModelRunner>(config_, default_options(GetParam().page_size));
}

void GoldenTest::expect_greedy_matches(const GenerateOutput& out, size_t prompt,
                                       const std::string& what) {
  EXPECT_EQ(out.output_ids, ref_.greedy_ids[prompt]) << what << ", prompt " << prompt;
  for (int s = 0; s < kGreedySteps; ++s)
    EXPECT_LE(
        max_abs_diff(out.logits[s].data(), ref_.greedy_logits[prompt].row(s), config_.vocab_size),
        kReferenceTolerance)
        << what << ", prompt " << prompt << " step " << s;
}

void GoldenTest::check_prefill_logits() {
  for (size_t i = 0; i < ref_.input_ids.size(); ++i) {
    const Tensor logits = prefill_all_logits(*runner_, ref_.input_ids[i]);
    EXPECT_LE(max_abs_diff(logits, ref_.logits[i]), kReferenceTolerance) << "prompt " << i;
  }
}

void GoldenTest::check_greedy_batched_and_single() {
  const auto batched = greedy(*runner_, ref_.input_ids, kGreedySteps);
  for (size_t i = 0; i < ref_.input_ids.size(); ++i) {
    const auto single = greedy(*runner_, {ref_.input_ids[i]}, kGreedySteps);
    expect_greedy_matches(batched[i], i, "batched");
    expect_greedy_matches(single[0], i, "single");
    EXPECT_EQ(batched[i].output_ids, single[0].output_ids) << "prompt " << i;
    for (int s = 0; s < kGreedySteps; ++s)
      EXPECT_LE(
          max_abs_diff(batched[i].logits[s].data(), single[0].logits[s].data(), config_.vocab_size),
          kInvarianceTolerance)
          << "prompt " << i << " step " << s;
  }
}

void GoldenTest::check_chunked_prefill_equals_whole() {
  const auto& ids = ref_.input_ids.back();
  const Tensor whole = prefill_all_logits(*runner_, ids);
  for (int chunk : {1, 5, 16}) {
    const Tensor chunked = prefill_all_logits(*runner_, ids, chunk);
    EXPECT_LE(max_abs_diff(whole, chunked), kInvarianceTolerance) << "chunk " << chunk;
  }
  const auto a = greedy(*runner_, ref_.input_ids, 6, false);
  const auto b = greedy(*runner_, ref_.input_ids, 6, false, 5);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].output_ids, b[i].output_ids) << i;
}

std::string golden_model_dir(const std::string& fixture) {
  namespace fs = std::filesystem;
  if (fixture != "nemotron_h_moe_hub_config") return fixture_dir(fixture);
  static const std::string dir = [] {
    const fs::path d = fs::path(scratch_dir()) / "nemotron_h_moe_hub_config";
    fs::create_directories(d);
    fs::copy_file(fixture_dir("nemotron_h_moe_hub_config") + "/config.json", d / "config.json",
                  fs::copy_options::overwrite_existing);
    for (const char* f : {"model.safetensors", "reference.safetensors"})  // linked, not copied
      if (!fs::exists(d / f))
        fs::create_symlink(fs::absolute(fixture_dir("nemotron_h_moe") + "/" + f), d / f);
    return d.string();
  }();
  return dir;
}

std::string golden_reference_fixture(const std::string& fixture) {
  return fixture == "nemotron_h_moe_hub_config" ? "nemotron_h_moe" : fixture;
}

// A prompt that extends a finished one (prompt 2, 23 tokens: past every fixture's sliding
// window) takes its KV from the radix cache through the scheduler; its greedy logits equal
// the uncached run's.
void GoldenTest::check_prefix_cached_equals_uncached() {
  std::vector<int> longer = ref_.input_ids[2];
  longer.insert(longer.end(), ref_.input_ids[1].begin(), ref_.input_ids[1].end());
  std::vector<std::vector<float>> logits[2];
  int cached_tokens = 0;
  for (bool radix : {true, false}) {
    RunnerOptions o = default_options(GetParam().page_size);
    o.radix_cache = radix;
    ModelRunner runner(config_, o);
    SchedulerOptions so;
    so.disable_radix_cache = !radix;
    Scheduler s(runner, so);
    run_all(s, {ref_.input_ids[2]}, 3);
    const auto done = run_all(s, {longer}, 3);
    logits[radix] = done.at(0).logits;
    if (radix) cached_tokens = done.at(0).cached_tokens;
  }
  EXPECT_GT(cached_tokens, 0) << "the second prompt should hit the prefix cache";
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t s = 0; s < logits[0].size(); ++s)
    EXPECT_LE(max_abs_diff(logits[1][s].data(), logits[0][s].data(), config_.vocab_size),
              kInvarianceTolerance)
        << "step " << s;
}

}  // namespace strata::test
