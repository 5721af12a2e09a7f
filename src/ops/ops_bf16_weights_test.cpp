// CpuOps with bf16 weight matrices (--dtype bfloat16) against the f32 reference, op by op, on
// the table of cases the GPU runs (ops_device_cases.h). The cases round their inputs to bf16,
// so a weight stored in bf16 loses nothing; the ops widen it back exactly, so the two differ
// only in the order of their sums (the bf16 decode kernel is its own loop): 1e-4 of the
// output's scale, not the GPU's bf16 tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "ops/ops_device_cases.h"

namespace strata::ops_test {
namespace {

class OpsBf16Weights : public ::testing::TestWithParam<Case> {};

TEST_P(OpsBf16Weights, MatchTheF32Reference) {
  const Case& c = GetParam();
  auto f32 = make_cpu_ops(DType::F32);
  auto bf16 = make_cpu_ops(DType::BF16);
  Rng f32_rng{c.seed}, bf16_rng{c.seed};
  const std::vector<Tensor> want = c.run(*f32, f32_rng);
  const std::vector<Tensor> got = c.run(*bf16, bf16_rng);
  ASSERT_EQ(want.size(), got.size());
  if (c.compare) return c.compare(want, got);
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(want[i], got[i], std::min(c.tol, 1e-4), c.name + " output " + std::to_string(i));
}

// The cases of the ops that read a weight matrix (the others never see one).
std::vector<Case> weight_cases() {
  std::vector<Case> out;
  for (Case& c : all_cases())
    for (const char* op : {"linear", "head_linear", "experts", "embedding"})
      if (c.name.rfind(op, 0) == 0) {
        out.push_back(std::move(c));
        break;
      }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, OpsBf16Weights, ::testing::ValuesIn(weight_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace strata::ops_test
