#pragma once
// Mixture of experts: a router picks `top_k` experts per token and weights their outputs;
// optional shared experts see every token.
//
//   scores   = score_fn(x W_router^T)                  softmax (DeepSeek-V2, Qwen-MoE, Mixtral)
//                                                      or sigmoid (DeepSeek-V3, NemotronH)
//   choice   = scores + correction_bias                (V3 / NemotronH; selection only)
//   groups   = top `topk_groups` of `num_groups` by a group score (max, or sum of top 2),
//              experts outside them masked to 0 (as transformers does)
//   experts  = top_k of choice;  w = scores[experts]   (never the biased value)
//   w        = w / sum(w) if normalize_topk;  w *= routed_scaling_factor
//   out      = sum_k w_k expert_k(x) + shared(x)
//
// Each router family is a RouterConfig value, not a code path: Mixtral is softmax + top-k +
// normalize; Qwen-MoE the same with normalize = norm_topk_prob; DeepSeek-V2 softmax greedy
// (or group-limited greedy); DeepSeek-V3 and NemotronH sigmoid + bias + grouped top-k.
// Expert and router tensor names come from the caller. NemotronH, for instance:
//   MoEOptions o;  o.router = {n_routed_experts, num_experts_per_tok, RouterScoring::Sigmoid,
//                              n_group, topk_group, GroupScore::TopTwoSum, true, norm_topk_prob,
//                              routed_scaling_factor};
//   o.expert = {moe_intermediate_size, /*gated=*/false, ExpertActivation::Relu2};
//   o.shared_expert = {moe_shared_expert_intermediate_size, false, ExpertActivation::Relu2};
//   MoELayer(w, "backbone.layers.1.mixer", o);   // mixer.gate.weight, mixer.experts.{i}.up_proj...
#include <string>
#include <vector>

#include "layers/linear.h"

namespace strata {

enum class RouterScoring { Softmax, Sigmoid };
// How a group of experts is ranked for group-limited routing.
enum class GroupScore {
  Max,        // highest expert score in the group (DeepSeek-V2 group_limited_greedy)
  TopTwoSum,  // sum of the two highest (DeepSeek-V3 noaux_tc, NemotronH)
};

struct RouterConfig {
  int num_experts = 0;
  int top_k = 0;
  RouterScoring scoring = RouterScoring::Softmax;
  int num_groups = 1;   // 1: no group limit
  int topk_groups = 1;  // groups kept per token
  GroupScore group_score = GroupScore::Max;
  bool correction_bias = false;  // add e_score_correction_bias to scores for the choice only
  bool normalize_topk = false;   // renormalize the chosen weights to sum to 1
  float routed_scaling_factor = 1.0f;

  // Rejects inconsistent settings with a message naming the config fields.
  void validate() const;
};

// Routes `rows` tokens: router_logits [rows, num_experts] -> expert_ids / weights
// [rows, top_k]. `bias` [num_experts] is read only when cfg.correction_bias. Experts of one
// token come out in descending order of their choice score.
void route_tokens(const RouterConfig& cfg, const float* router_logits, int64_t rows,
                  const float* bias, int32_t* expert_ids, float* weights);

enum class ExpertActivation { Silu, GeluTanh, Relu2 };
ExpertActivation parse_expert_activation(const std::string& hidden_act);

// One expert's MLP: gated  down(act(gate x) * up x)  or plain  down(act(up x)).
struct ExpertMlpSpec {
  int intermediate_size = 0;
  bool gated = true;
  ExpertActivation activation = ExpertActivation::Silu;
  bool bias = false;
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
};

struct MoEOptions {
  int hidden_size = 0;
  RouterConfig router;
  std::string router_gate = "gate";  // router weight `{prefix}.{router_gate}.weight`
  std::string correction_bias = "gate.e_score_correction_bias";  // when router.correction_bias
  std::string experts = "experts";  // expert i is `{prefix}.{experts}.{i}.{gate|up|down}`
  ExpertMlpSpec expert;
  // Shared experts (always on); intermediate_size 0 = none. DeepSeek stores n_shared_experts
  // as one MLP of n_shared * moe_intermediate_size.
  std::string shared = "shared_experts";
  ExpertMlpSpec shared_expert{0};
  // Qwen2-MoE scales the shared expert by sigmoid(x . w_gate) with `{prefix}.{shared_gate}`
  // [1, hidden]; empty = no such gate.
  std::string shared_gate;
};

class ExpertMlp {
 public:
  ExpertMlp() = default;
  ExpertMlp(WeightSource& w, const std::string& prefix, int hidden, const ExpertMlpSpec& spec);
  // x [rows, hidden] -> y [rows, hidden]
  void forward(const float* x, int64_t rows, float* y) const;

 private:
  ExpertMlpSpec spec_;
  Linear in_, down_;  // in_ = gate|up stacked (gated) or up
};

class MoELayer {
 public:
  MoELayer(WeightSource& w, const std::string& prefix, const MoEOptions& opt);
  Tensor forward(const Tensor& x) const;  // [T, hidden] -> [T, hidden]
  const RouterConfig& router() const { return opt_.router; }

 private:
  MoEOptions opt_;
  Linear router_;
  Tensor bias_;
  std::vector<ExpertMlp> experts_;
  ExpertMlp shared_;
  Linear shared_gate_;
  bool has_shared_ = false;
};

}  // namespace strata
