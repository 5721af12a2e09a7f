#include "layers/moe.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

ExpertMlp::ExpertMlp(ParamLoader& w, const std::string& prefix, int hidden,
                     const ExpertMlpSpec& spec)
    : spec_(spec) {
  const int64_t inter = spec.intermediate_size;
  in_ = spec.gated ? Linear::load_stacked(w, {prefix + "." + spec.gate, prefix + "." + spec.up},
                                          hidden, {inter, inter}, spec.bias)
                   : Linear::load(w, prefix + "." + spec.up, hidden, inter, spec.bias);
  down_ = Linear::load(w, prefix + "." + spec.down, inter, hidden, spec.bias);
}

Tensor ExpertMlp::forward(Ops& ops, const Tensor& x) const {
  const Tensor h = in_.forward(ops, x);
  Tensor act = ops.empty_activation({x.rows(), spec_.intermediate_size});
  if (spec_.gated)
    ops.gated_activation(h, spec_.activation, act);
  else
    ops.activation(h, spec_.activation, act);
  return down_.forward(ops, act);
}

MoELayer::MoELayer(ParamLoader& w, const std::string& prefix, const MoEOptions& opt) : opt_(opt) {
  opt.router.validate();
  const int e = opt.router.num_experts;
  const ExpertMlpSpec& x = opt.expert;
  // The router in f32 on every device, as transformers computes it (NemotronH's and
  // DeepSeek-V3's routers cast to f32): in bf16, near-tied expert scores flip.
  router_ = Linear::from_tensors(
      w.matrix_f32(prefix + "." + opt.router_gate + ".weight", e, opt.hidden_size));
  if (opt.router.correction_bias) bias_ = w.vector(prefix + "." + opt.correction_bias, e);
  // The routed experts stacked, so that one op runs all of them over tokens grouped by expert.
  experts_.num_experts = e;
  experts_.hidden = opt.hidden_size;
  experts_.intermediate = x.intermediate_size;
  experts_.gated = x.gated;
  experts_.activation = x.activation;
  std::vector<std::string> in_names, down_names;
  std::vector<int64_t> in_rows, down_rows;
  for (int i = 0; i < e; ++i) {
    const std::string p = fmt::format("{}.{}.{}.", prefix, opt.experts, i);
    if (x.gated) {
      in_names.insert(in_names.end(), {p + x.gate, p + x.up});
      in_rows.insert(in_rows.end(), {x.intermediate_size, x.intermediate_size});
    } else {
      in_names.push_back(p + x.up);
      in_rows.push_back(x.intermediate_size);
    }
    down_names.push_back(p + x.down);
    down_rows.push_back(opt.hidden_size);
  }
  experts_.w_in = w.matrix(in_names, opt.hidden_size, in_rows);
  experts_.w_down = w.matrix(down_names, x.intermediate_size, down_rows);
  experts_.b_in = w.biases(in_names, in_rows, x.bias);
  experts_.b_down = w.biases(down_names, down_rows, x.bias);
  has_shared_ = opt.shared_expert.intermediate_size > 0;
  if (has_shared_)
    shared_ = ExpertMlp(w, prefix + "." + opt.shared, opt.hidden_size, opt.shared_expert);
  if (has_shared_ && !opt.shared_gate.empty())
    shared_gate_ = Linear::from_tensors(
        w.matrix_f32(prefix + "." + opt.shared_gate + ".weight", 1, opt.hidden_size));
}

void MoELayer::forward(Ops& ops, const Tensor& x, Tensor& residual) const {
  const int64_t t = x.rows();
  const int k = opt_.router.top_k;
  const Tensor logits = router_.forward(ops, x);
  Tensor ids = ops.empty({t, k}, DType::I32), weights = ops.empty({t, k});
  ops.route(opt_.router, logits, bias_.empty() ? nullptr : &bias_, ids, weights);
  ops.experts(experts_, x, ids, weights, residual);
  if (!has_shared_) return;
  Tensor shared = shared_.forward(ops, x);
  if (shared_gate_.loaded())  // Qwen2-MoE / Qwen3-Next: shared(x) * sigmoid(x . w_gate)
    ops.mul(shared, shared_gate_.forward(ops, x), true, shared);
  ops.add(residual, shared);
}

}  // namespace strata
