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
//   o.expert = {moe_intermediate_size, /*gated=*/false, Activation::Relu2};
//   o.shared_expert = {moe_shared_expert_intermediate_size, false, Activation::Relu2};
//   MoELayer(w, "backbone.layers.1.mixer", o);   // mixer.gate.weight, mixer.experts.{i}.up_proj...
#include <string>
#include <vector>

#include "layers/linear.h"
#include "ops/ops.h"

namespace strata {

// RouterConfig, RouterScoring and GroupScore are in ops/ops.h (Ops::route computes them);
// cpu::route_tokens (kernels/cpu/routing_rope.h) is the reference.

// One expert's MLP: gated  down(act(gate x) * up x)  or plain  down(act(up x)).
struct ExpertMlpSpec {
  int intermediate_size = 0;
  bool gated = true;
  Activation activation = Activation::Silu;
  bool bias = false;
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
};

// How a checkpoint stores the routed experts.
enum class ExpertStorage {
  // One tensor per expert and projection: `{experts}.{i}.{gate|up|down}.weight` (nn.Linear
  // layout, [out, in]).
  PerExpert,
  // gpt-oss: all experts in one tensor per projection, [E, in, out]: `{experts}.gate_up_proj`
  // [E, H, 2I] with gate and up interleaved by column (gate = even columns), its bias
  // `gate_up_proj_bias` [E, 2I], `down_proj` [E, I, H] and `down_proj_bias` [E, H].
  StackedInterleaved,
};

struct MoEOptions {
  int hidden_size = 0;
  RouterConfig router;
  std::string router_gate = "gate";  // router weight `{prefix}.{router_gate}.weight`
  bool router_bias = false;          // `{prefix}.{router_gate}.bias` added to the logits
  ExpertStorage storage = ExpertStorage::PerExpert;
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

// A dense expert-shaped MLP (the shared experts). Under tensor parallelism its intermediate
// columns are split like GatedMLP's (down_proj sums them).
class ExpertMlp {
 public:
  ExpertMlp() = default;
  ExpertMlp(ParamLoader& w, const std::string& prefix, int hidden, const ExpertMlpSpec& spec);
  // x [rows, hidden] -> [rows, hidden] f32
  Tensor forward(Ops& ops, const Tensor& x) const;

 private:
  ExpertMlpSpec spec_;
  Linear in_, down_;  // in_ = gate|up stacked (gated) or up
};

// Under tensor parallelism every rank holds every expert with its share of the intermediate
// columns (SGLang's and vLLM's default MoE split): each rank routes every token the same way
// (the router is whole), its experts add partial outputs, and those are summed over the group.
class MoELayer {
 public:
  // Expert weights of `storage`, stacked as ExpertWeights wants them (this rank's columns).
  static ExpertWeights load_experts(ParamLoader& w, const std::string& prefix,
                                    const MoEOptions& opt);
  MoELayer(ParamLoader& w, const std::string& prefix, const MoEOptions& opt);
  // residual += MoE(x);  x [T, hidden]
  void forward(Ops& ops, const Tensor& x, Tensor& residual) const;
  const RouterConfig& router() const { return opt_.router; }

 private:
  MoEOptions opt_;
  Linear router_;
  Tensor bias_;
  ExpertWeights experts_;
  ExpertMlp shared_;
  Linear shared_gate_;
  bool has_shared_ = false;
  Communicator* reduce_over_ = nullptr;  // the TP group the routed experts' parts are summed over
};

}  // namespace strata
