// CpuOps with its other weight formats against the f32 reference, op by op, on the table of
// cases the GPU runs (ops_device_cases.h), for the ops that read a weight matrix.
// - bf16 (--dtype bfloat16): the cases round their inputs and weights to bf16, so storing a
//   weight in bf16 and rounding a product's input lose nothing, and a single product differs
//   only in the order of its sums: 1e-4 of the output's scale. The experts' second product reads
//   the activation of the first, which is not bf16-exact: each of its inputs moves by up to 2^-9
//   relative (2e-3), partly cancelling over the sum (measured 2026-12-07: 0.6-5.4e-4 of the
//   output's scale over the six expert cases), so the experts get 2e-3, bf16's own step, still
//   far below the GPU's bf16 tolerances.
// - int8 (--quantization int8): each weight and each activation a product reads is off by up to
//   half a step, max |block| / 254. The cases' weights are uniform with the scale 1 / sqrt(in)
//   and their inputs uniform in [-1, 1], so a product's error is ~0.2% of its output's scale
//   per case (about sqrt(in) terms of 1/254 of 1/sqrt(in) each, over 3), and the worst of
//   hundreds of outputs stays under 1% (measured 2026-12-03: linear 0.75%, head_linear 0.70%,
//   experts 0.39%); embedding rows, quantized once, within 1/254 of their scale (measured: at
//   that bound, 0.394%; 1% slack for the rounding of the bound itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "ops/ops_device_cases.h"

namespace strata::ops_test {
namespace {

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

// The case on CpuOps with f32 weights and with `weights`, compared within `tol` (or by the
// case's own comparison).
void expect_like_f32(const Case& c, DType weights, double tol) {
  auto f32 = make_cpu_ops(DType::F32);
  auto other = make_cpu_ops(weights);
  Rng f32_rng{c.seed}, other_rng{c.seed};
  const std::vector<Tensor> want = c.run(*f32, f32_rng);
  const std::vector<Tensor> got = c.run(*other, other_rng);
  ASSERT_EQ(want.size(), got.size());
  if (c.compare) return c.compare(want, got);
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(want[i], got[i], tol, c.name + " output " + std::to_string(i));
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return i.param.name;
}

class OpsBf16Weights : public ::testing::TestWithParam<Case> {};

TEST_P(OpsBf16Weights, MatchTheF32Reference) {
  const bool two_products = GetParam().name.rfind("experts", 0) == 0;
  expect_like_f32(GetParam(), DType::BF16, std::min(GetParam().tol, two_products ? 2e-3 : 1e-4));
}

INSTANTIATE_TEST_SUITE_P(Cases, OpsBf16Weights, ::testing::ValuesIn(weight_cases()), case_name);

class OpsInt8Weights : public ::testing::TestWithParam<Case> {};

TEST_P(OpsInt8Weights, MatchTheF32ReferenceWithinTheInt8Error) {
  const Case& c = GetParam();
  const bool embedding = c.name.rfind("embedding", 0) == 0;
  expect_like_f32(c, DType::Q8, embedding ? 1.01 / 254 : 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Cases, OpsInt8Weights, ::testing::ValuesIn(weight_cases()), case_name);

}  // namespace
}  // namespace strata::ops_test
