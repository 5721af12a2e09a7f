// The MoE layer against transformers on a model family other than DeepSeek: NemotronH's MoE
// blocks (sigmoid router with e_score_correction_bias, norm_topk_prob, routed_scaling_factor
// 2.5, plain relu^2 experts named up_proj / down_proj, a wider shared expert). The fixture's
// reference keeps every layer's input (hidden_states[k] = input of layer k), and a NemotronH
// block is  out = x + mixer(RMSNorm(x)),  so each MoE block is checked on its own.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "layers/moe.h"
#include "model/json_util.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "test_util.h"

namespace strata::test {

TEST(MoEReference, NemotronHMoEBlocksMatchTransformers) {
  const std::string dir = fixture_dir("nemotron_h_moe");
  // Read as plain JSON: parsing NemotronH's hybrid layout is not what this test is about.
  const json c = read_json_file(dir + "/config.json");
  CheckpointWeights checkpoint(dir);
  auto ops = make_cpu_ops();
  ParamLoader weights(checkpoint, *ops, false, 0);
  SafetensorsFile ref(dir + "/reference.safetensors");

  MoEOptions o;
  const int hidden = c.at("hidden_size");
  o.hidden_size = hidden;
  o.router.num_experts = c.at("n_routed_experts");
  o.router.top_k = c.at("num_experts_per_tok");
  o.router.scoring = RouterScoring::Sigmoid;
  o.router.num_groups = c.at("n_group");
  o.router.topk_groups = c.at("topk_group");
  o.router.group_score = GroupScore::TopTwoSum;
  o.router.correction_bias = true;
  o.router.normalize_topk = c.at("norm_topk_prob");
  o.router.routed_scaling_factor = c.at("routed_scaling_factor");
  const Activation act = parse_activation(c.at("mlp_hidden_act"));
  o.expert = {c.at("moe_intermediate_size"), false, act};
  o.shared_expert = {c.at("moe_shared_expert_intermediate_size"), false, act};

  // Pattern "MEM*EM-E": E blocks are layers 1, 4 and 7; the last layer's output is not kept
  // (hidden_states ends with the final norm's output), so 1 and 4 are checked.
  for (int layer : {1, 4}) {
    const std::string p = fmt::format("backbone.layers.{}.", layer);
    const MoELayer moe(weights, p + "mixer", o);
    const RMSNorm norm =
        RMSNorm::load(weights, p + "norm.weight", hidden, c.at("layer_norm_epsilon").get<float>());
    for (int prompt = 0; prompt < 4; ++prompt) {
      const TensorInfo& t = ref.tensors().at(fmt::format("p{}.hidden_states", prompt));
      Tensor hs(t.shape);  // [layers + 1, L, hidden]
      convert_to_f32(t.dtype, t.data, hs.data(), t.numel());
      const int64_t len = hs.dim(1), width = hs.dim(2);
      Tensor x({len, width}), expected({len, width});
      std::copy(hs.data() + layer * len * width, hs.data() + (layer + 1) * len * width, x.data());
      std::copy(hs.data() + (layer + 1) * len * width, hs.data() + (layer + 2) * len * width,
                expected.data());
      Tensor out = x.clone();
      moe.forward(*ops, norm.forward(*ops, x), out);
      EXPECT_LE(max_abs_diff(out, expected), 1e-4) << "layer " << layer << ", prompt " << prompt;
    }
  }
}

}  // namespace strata::test
