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
