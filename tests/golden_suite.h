#pragma once
// The golden-test suite every architecture runs (dense, DeepSeek MLA, hybrids): logits against
// the Hugging Face reference, greedy ids batched and single, and the invariances batched =
// single, page size 16 = page size 1, chunked prefill = one prefill, prefix-cached = uncached. Each
// family's test file derives its fixture from GoldenTest (to adjust the config or the comparison of
// greedy ids) and states its TEST_Ps with the checks below.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "test_util.h"

namespace strata::test {

struct GoldenCase {
  std::string fixture;
  int page_size;
  friend void PrintTo(const GoldenCase& c, std::ostream* os) {
    *os << c.fixture << "/page" << c.page_size;
  }
};

std::string golden_case_name(const testing::TestParamInfo<GoldenCase>& info);

// The model directory of a golden fixture, and the fixture whose reference it is compared to:
// nemotron_h_moe_hub_config vendors only its config.json (the published spelling:
// hybrid_override_pattern, bare Infinity); its weights and reference are nemotron_h_moe's, so
// its directory is assembled from both.
std::string golden_model_dir(const std::string& fixture);
std::string golden_reference_fixture(const std::string& fixture);

// Every fixture at page sizes 1 and 16.
std::vector<GoldenCase> golden_cases(const std::vector<std::string>& fixtures);

// The GPU against the f32 references (golden_dense_cuda_test.cpp, cuda_invariance_test.cpp):
// its weights, GEMM inputs and KV cache are bf16, so logits agree within a share of the
// reference logits' spread, not the CPU's 1e-3. The share and the prompts a fixture is not
// compared on are one table (golden_suite.cpp), with the measurements behind each entry.
double bf16_tolerance_share(const std::string& fixture);
// Whether prompt `prompt`'s prefill logits are compared (false where a router sits within bf16
// rounding of another expert choice: a discrete change no tolerance absorbs).
bool bf16_prefill_compared(const std::string& fixture, size_t prompt);
// How many greedy steps of `prompt` are compared before a known router flip (-1: all).
int bf16_greedy_steps_compared(const std::string& fixture, size_t prompt);
// The same for the CPU's --dtype bfloat16 (bf16 product inputs, f32 elsewhere).
int cpu_bf16_greedy_steps_compared(const std::string& fixture, size_t prompt);
// The same three for the CPU's int8 weights (--quantization int8).
double int8_tolerance_share(const std::string& fixture);
bool int8_prefill_compared(const std::string& fixture, size_t prompt);
int int8_greedy_steps_compared(const std::string& fixture, size_t prompt);

class GoldenTest : public testing::TestWithParam<GoldenCase> {
 protected:
  void SetUp() override;
  // The directory the model loads from and the fixture whose reference it is compared with
  // (the same, unless a test assembles a directory).
  virtual std::string model_dir() const { return fixture_dir(GetParam().fixture); }
  virtual std::string reference_fixture() const { return GetParam().fixture; }
  // Greedy ids of `out` against the reference's for `prompt`; exact by default.
  virtual void expect_greedy_matches(const GenerateOutput& out, size_t prompt,
                                     const std::string& what);

  // The checks, each one test.
  void check_prefill_logits();
  void check_greedy_batched_and_single();
  void check_chunked_prefill_equals_whole();
  void check_prefix_cached_equals_uncached();

  Reference ref_;
  ModelConfig config_;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace strata::test
