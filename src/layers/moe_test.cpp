// Router variants on examples worked out by hand (the expected numbers in each test follow
// from the scores written next to them), plus one MoE layer forward on hand-built weights.
#include "layers/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "kernels/cpu/routing_rope.h"

namespace strata {

namespace {

// Logits whose softmax is exactly `p` (p sums to 1).
std::vector<float> logits_for_softmax(const std::vector<float>& p) {
  std::vector<float> l;
  for (float x : p) l.push_back(std::log(x));
  return l;
}

// Logits whose sigmoid is exactly `s`.
std::vector<float> logits_for_sigmoid(const std::vector<float>& s) {
  std::vector<float> l;
  for (float x : s) l.push_back(std::log(x / (1 - x)));
  return l;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(const RouterConfig& cfg, const std::vector<float>& logits,
             const float* bias = nullptr) {
  cfg.validate();
  Routed r{std::vector<int32_t>(cfg.top_k), std::vector<float>(cfg.top_k)};
  cpu::route_tokens(cfg, logits.data(), 1, bias, r.ids.data(), r.weights.data());
  return r;
}

}  // namespace

// DeepSeek-V2 greedy: softmax [.1 .2 .3 .4] -> experts 3, 2 with their probabilities, times
// routed_scaling_factor; Qwen-MoE / Mixtral (normalize) -> .4/.7 and .3/.7.
TEST(Router, SoftmaxGreedyTopK) {
  RouterConfig cfg;
  cfg.num_experts = 4;
  cfg.top_k = 2;
  const auto logits = logits_for_softmax({0.1f, 0.2f, 0.3f, 0.4f});
  Routed r = route(cfg, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(r.weights[0], 0.4f, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.3f, 1e-6);

  cfg.routed_scaling_factor = 2.0f;
  r = route(cfg, logits);
  EXPECT_NEAR(r.weights[0], 0.8f, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.6f, 1e-6);

  cfg.routed_scaling_factor = 1.0f;
  cfg.normalize_topk = true;  // Mixtral / Qwen-MoE with norm_topk_prob
  r = route(cfg, logits);
  EXPECT_NEAR(r.weights[0], 0.4f / 0.7f, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.3f / 0.7f, 1e-6);
}

// DeepSeek-V2 group_limited_greedy: 4 groups of 2, probabilities
//   g0 [.05 .20]  g1 [.17 .17]  g2 [.02 .18]  g3 [.06 .15]
// group maxima .20 .17 .18 .15 -> keep g0, g2 -> top 3 of {.05 .20 .02 .18} = experts 1, 5, 0.
// Without the group limit the third choice would be expert 2 (.17).
TEST(Router, SoftmaxGroupLimitedGreedy) {
  RouterConfig cfg;
  cfg.num_experts = 8;
  cfg.top_k = 3;
  const auto logits = logits_for_softmax({0.05f, 0.20f, 0.17f, 0.17f, 0.02f, 0.18f, 0.06f, 0.15f});
  Routed free = route(cfg, logits);
  EXPECT_EQ(free.ids, (std::vector<int32_t>{1, 5, 2}));

  cfg.num_groups = 4;
  cfg.topk_groups = 2;
  cfg.group_score = GroupScore::Max;
  Routed r = route(cfg, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 5, 0}));
  EXPECT_NEAR(r.weights[0], 0.20f, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.18f, 1e-6);
  EXPECT_NEAR(r.weights[2], 0.05f, 1e-6);
}

// DeepSeek-V3 / NemotronH: sigmoid scores
//   g0 [.9 .1 .2 .3]  g1 [.6 .7 .5 .4]
// Unbiased, group scores (sum of top two) are 1.2 and 1.3 -> g1 -> experts 5, 4.
// With correction bias +.2 on expert 3, g0's choice scores are [.9 .1 .2 .5] -> 1.4 -> g0
// wins -> experts 0, 3; weights are the *unbiased* scores .9, .3, normalized to .75, .25,
// times routed_scaling_factor 2.5 -> 1.875, 0.625.
TEST(Router, SigmoidGroupedTopKWithCorrectionBias) {
  RouterConfig cfg;
  cfg.num_experts = 8;
  cfg.top_k = 2;
  cfg.scoring = RouterScoring::Sigmoid;
  cfg.num_groups = 2;
  cfg.topk_groups = 1;
  cfg.group_score = GroupScore::TopTwoSum;
  cfg.correction_bias = true;
  cfg.normalize_topk = true;
  cfg.routed_scaling_factor = 2.5f;
  const auto logits = logits_for_sigmoid({0.9f, 0.1f, 0.2f, 0.3f, 0.6f, 0.7f, 0.5f, 0.4f});

  const std::vector<float> no_bias(8, 0.0f);
  Routed r = route(cfg, logits, no_bias.data());
  EXPECT_EQ(r.ids, (std::vector<int32_t>{5, 4}));
  EXPECT_NEAR(r.weights[0], 2.5f * 0.7f / 1.3f, 1e-5);
  EXPECT_NEAR(r.weights[1], 2.5f * 0.6f / 1.3f, 1e-5);

  const std::vector<float> bias = {0, 0, 0, 0.2f, 0, 0, 0, 0};
  r = route(cfg, logits, bias.data());
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 3}));
  EXPECT_NEAR(r.weights[0], 1.875f, 1e-5);
  EXPECT_NEAR(r.weights[1], 0.625f, 1e-5);

  // Without normalization the weights are the raw sigmoid scores times the scaling factor.
  cfg.normalize_topk = false;
  r = route(cfg, logits, bias.data());
  EXPECT_NEAR(r.weights[0], 2.5f * 0.9f, 1e-5);
  EXPECT_NEAR(r.weights[1], 2.5f * 0.3f, 1e-5);
}

TEST(Router, InconsistentSettingsAreClearErrors) {
  RouterConfig cfg;
  cfg.num_experts = 8;
  cfg.top_k = 3;
  cfg.num_groups = 4;
  cfg.topk_groups = 1;  // one group of 2 experts cannot supply 3
  try {
    cfg.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_group"), std::string::npos) << e.what();
  }
  cfg.num_groups = 3;  // does not divide 8
  EXPECT_THROW(cfg.validate(), Error);
  cfg.num_groups = 1;
  cfg.top_k = 9;
  EXPECT_THROW(cfg.validate(), Error);
}

namespace {

class MapWeights : public WeightSource {
 public:
  std::map<std::string, std::vector<float>> tensors;
  bool has(const std::string& n) const override { return tensors.count(n) > 0; }
  Tensor load(const std::string& n, const std::vector<int64_t>& shape) override {
    auto it = tensors.find(n);
    if (it == tensors.end()) fail("missing {}", n);
    Tensor t(shape);
    EXPECT_EQ(static_cast<int64_t>(it->second.size()), t.numel()) << n;
    std::copy(it->second.begin(), it->second.end(), t.data());
    return t;
  }
  const TensorInfo* info(const std::string&) const override { return nullptr; }
  std::vector<std::string> unused() const override { return {}; }
};

}  // namespace

// Two plain relu^2 experts (NemotronH shape) of width 2 with up = identity and down = c * I,
// top-1 softmax routing, a shared expert with c = 1. Router rows [1 0] and [0 1]: a token
// [a, b] goes to expert 0 if a > b, with weight softmax(a, b)[0]. Token [2, -1]:
// expert 0 (c = 3): w0 * 3 * [4, 0];  shared: [4, 0].
TEST(MoELayer, RoutesTokensThroughNamedExperts) {
  MapWeights w;
  w.tensors["m.gate.weight"] = {1, 0, 0, 1};
  w.tensors["m.experts.0.up_proj.weight"] = {1, 0, 0, 1};
  w.tensors["m.experts.0.down_proj.weight"] = {3, 0, 0, 3};
  w.tensors["m.experts.1.up_proj.weight"] = {1, 0, 0, 1};
  w.tensors["m.experts.1.down_proj.weight"] = {5, 0, 0, 5};
  w.tensors["m.shared_experts.up_proj.weight"] = {1, 0, 0, 1};
  w.tensors["m.shared_experts.down_proj.weight"] = {1, 0, 0, 1};
  MoEOptions o;
  o.hidden_size = 2;
  o.router.num_experts = 2;
  o.router.top_k = 1;
  o.expert = {2, false, Activation::Relu2};
  o.shared_expert = {2, false, Activation::Relu2};
  auto ops = make_cpu_ops();
  ParamLoader loader(w, *ops, false, 0);
  MoELayer moe(loader, "m", o);
  Tensor x({2, 2});
  x.data()[0] = 2, x.data()[1] = -1;   // -> expert 0
  x.data()[2] = 0.5, x.data()[3] = 1;  // -> expert 1
  Tensor y({2, 2});                    // the residual the layer adds into: zero
  moe.forward(*ops, x, y);
  const float w0 = 1.0f / (1.0f + std::exp(-3.0f));  // softmax(2, -1)[0]
  const float w1 = 1.0f / (1.0f + std::exp(-0.5f));  // softmax(0.5, 1)[1]
  EXPECT_NEAR(y.data()[0], w0 * 3 * 4 + 4, 1e-5);
  EXPECT_NEAR(y.data()[1], 0.0f, 1e-6);
  EXPECT_NEAR(y.data()[2], w1 * 5 * 0.25f + 0.25f, 1e-5);
  EXPECT_NEAR(y.data()[3], w1 * 5 * 1 + 1, 1e-5);
}

}  // namespace strata
