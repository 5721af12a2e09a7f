// Sliding-window models served with their window space (RunnerOptions::hybrid_swa_memory, on
// wherever a pass has a token bound) against the same model keeping every position of every
// layer: the sliding layers' rows are window slots only, far fewer than the full space's, and
// the served outputs are the same, through decodes many windows long, prefix-cache hits,
// concurrency and page sizes 1 and 16; every slot of both spaces comes back.
#include <gtest/gtest.h>

#include "golden_suite.h"
#include "runtime/scheduler_test_util.h"

namespace strata::test {

namespace {

class WindowSpaceModel : public testing::TestWithParam<GoldenCase> {};

struct Served {
  std::map<uint64_t, Finished> first, second;
};

Served serve(const ModelConfig& config, const Reference& ref, int page_size, bool window_space,
             const std::string& device = "cpu") {
  RunnerOptions o = default_options(page_size, 4);
  o.device = device;
  o.radix_cache = true;
  o.hybrid_swa_memory = window_space;
  // As `strata serve` sizes it: a prefill chunk plus a decode token per running request.
  SchedulerOptions so;
  so.chunked_prefill_size = 252;
  o.max_pass_tokens = so.chunked_prefill_size + o.max_running_requests;
  ModelRunner runner(config, o);
  EXPECT_EQ(runner.memory().has_window_space(), window_space);
  if (window_space) {
    const int64_t window_rows = runner.memory().window_allocator().num_slots();
    EXPECT_LT(window_rows * 4, runner.memory().allocator().num_slots());
    for (int id : runner.kv_pool()->layer_ids()) {
      const bool sliding = config.layers[id].sliding_window > 0;
      EXPECT_EQ(runner.kv_pool()->in_window_space(id), sliding) << "layer " << id;
      EXPECT_EQ(runner.kv_pool()->k_buffer(id).rows(),
                sliding ? window_rows : runner.memory().allocator().num_slots())
          << "layer " << id;
    }
  }
  Scheduler s(runner, so);
  Served out;
  // Decoding 60 tokens runs far past the window (8 in these fixtures).
  out.first = run_all(s, {ref.input_ids[2]}, 60);
  // Then, at once: the same prompt again and one that extends it (both hit the prompt the
  // first request shared when its prefill ended), and an unrelated one.
  std::vector<int> longer = ref.input_ids[2];
  longer.insert(longer.end(), ref.input_ids[1].begin(), ref.input_ids[1].end());
  out.second = run_all(s, {ref.input_ids[2], longer, ref.input_ids[0]}, 30);
  EXPECT_TRUE(s.flush_cache());
  TokenMemory& m = runner.memory();
  EXPECT_EQ(m.allocator().free_pages(), m.allocator().usable_pages());
  if (window_space) {
    EXPECT_EQ(m.window_allocator().free_pages(), m.window_allocator().usable_pages());
  }
  return out;
}

void expect_same(const std::map<uint64_t, Finished>& a, const std::map<uint64_t, Finished>& b,
                 int vocab, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [id, fa] : a) {
    const Finished& fb = b.at(id);
    EXPECT_EQ(fa.ids, fb.ids) << what << " request " << id;
    ASSERT_EQ(fa.logits.size(), fb.logits.size()) << what << " request " << id;
    for (size_t t = 0; t < fa.logits.size(); ++t)
      EXPECT_LE(max_abs_diff(fa.logits[t].data(), fb.logits[t].data(), vocab), 1e-4)
          << what << " request " << id << " token " << t;
  }
}

}  // namespace

TEST_P(WindowSpaceModel, ServedOutputsEqualTheFullSpacesWithAWindowOfSlots) {
  const ModelConfig config = ModelConfig::load(fixture_dir(GetParam().fixture));
  const Reference ref = load_reference(GetParam().fixture);
  const Served windowed = serve(config, ref, GetParam().page_size, true);
  const Served full = serve(config, ref, GetParam().page_size, false);
  expect_same(windowed.first, full.first, config.vocab_size, "alone");
  expect_same(windowed.second, full.second, config.vocab_size, "together");
  // The prompt shared at the end of its prefill keeps its window: both later requests that
  // begin with it resume from the cache.
  EXPECT_GT(windowed.second.at(0).cached_tokens, 0);
  EXPECT_GT(windowed.second.at(1).cached_tokens, 0);
}

// The same on the GPU: the CUDA attention backend reads and writes the sliding layers' rows
// through its mirror of the window table. Both runs are on the GPU, so they compute the same
// sums in the same order: the CPU's 1e-4 holds.
class WindowSpaceModelCuda : public testing::TestWithParam<GoldenCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  }
};

TEST_P(WindowSpaceModelCuda, ServedOutputsEqualTheFullSpacesWithAWindowOfSlots) {
  const ModelConfig config = ModelConfig::load(fixture_dir(GetParam().fixture));
  const Reference ref = load_reference(GetParam().fixture);
  const Served windowed = serve(config, ref, GetParam().page_size, true, "cuda");
  const Served full = serve(config, ref, GetParam().page_size, false, "cuda");
  expect_same(windowed.first, full.first, config.vocab_size, "alone");
  expect_same(windowed.second, full.second, config.vocab_size, "together");
  EXPECT_GT(windowed.second.at(0).cached_tokens, 0);
  EXPECT_GT(windowed.second.at(1).cached_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WindowSpaceModelCuda,
                         testing::ValuesIn(golden_cases({"mistral_swa", "gemma3", "gpt_oss"})),
                         golden_case_name);

INSTANTIATE_TEST_SUITE_P(Fixtures, WindowSpaceModel,
                         testing::ValuesIn(golden_cases({"mistral_swa", "gemma3", "gpt_oss"})),
                         golden_case_name);

}  // namespace strata::test
