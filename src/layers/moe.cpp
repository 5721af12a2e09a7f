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
  // The router in f32 on every device, as transformers computes it (NemotronH's and
  // DeepSeek-V3's routers cast to f32): in bf16, near-tied expert scores flip.
  const std::string router = prefix + "." + opt.router_gate;
  router_ = Linear::from_tensors(w.matrix_f32(router + ".weight", e, opt.hidden_size),
                                 opt.router_bias ? w.vector(router + ".bias", e) : Tensor{});
  if (opt.router.correction_bias) bias_ = w.vector(prefix + "." + opt.correction_bias, e);
  experts_ = load_experts(w, prefix, opt);
  has_shared_ = opt.shared_expert.intermediate_size > 0;
  if (has_shared_)
    shared_ = ExpertMlp(w, prefix + "." + opt.shared, opt.hidden_size, opt.shared_expert);
  if (has_shared_ && !opt.shared_gate.empty())
    shared_gate_ = Linear::from_tensors(
        w.matrix_f32(prefix + "." + opt.shared_gate + ".weight", 1, opt.hidden_size));
}

namespace {

// The routed experts stacked, one tensor per projection (ExpertWeights), from one tensor per
// expert and projection.
void load_per_expert(ParamLoader& w, const std::string& prefix, const MoEOptions& opt,
                     ExpertWeights& out) {
  const ExpertMlpSpec& x = opt.expert;
  std::vector<std::string> in_names, down_names;
  std::vector<int64_t> in_rows, down_rows;
  for (int i = 0; i < opt.router.num_experts; ++i) {
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
  out.w_in = w.matrix(in_names, opt.hidden_size, in_rows);
  out.w_down = w.matrix(down_names, x.intermediate_size, down_rows);
  out.b_in = w.biases(in_names, in_rows, x.bias);
  out.b_down = w.biases(down_names, down_rows, x.bias);
}

// gpt-oss's [E, in, out] tensors with interleaved gate|up columns: expert e's gate rows then
// its up rows, each [out, in].
void load_stacked_interleaved(ParamLoader& w, const std::string& prefix, const MoEOptions& opt,
                              ExpertWeights& out) {
  const int64_t e = opt.router.num_experts, h = opt.hidden_size, n = opt.expert.intermediate_size;
  const std::string p = prefix + "." + opt.experts + ".";
  // Stored column c of gate_up is gate row c / 2 (even c) or up row n + c / 2 (odd c).
  const auto gate_up_row = [n](int64_t c) { return (c % 2 == 0 ? 0 : n) + c / 2; };
  out.w_in =
      w.matrix_rearranged(p + "gate_up_proj", {e, h, 2 * n}, e * 2 * n, h, [&](const Tensor& t) {
        Tensor m({e * 2 * n, h});
        for (int64_t x = 0; x < e; ++x)
          for (int64_t i = 0; i < h; ++i)
            for (int64_t c = 0; c < 2 * n; ++c)
              m.data()[(x * 2 * n + gate_up_row(c)) * h + i] = t.data()[(x * h + i) * 2 * n + c];
        return m;
      });
  out.w_down = w.matrix_rearranged(p + "down_proj", {e, n, h}, e * h, n, [&](const Tensor& t) {
    Tensor m({e * h, n});
    for (int64_t x = 0; x < e; ++x)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < h; ++c)
          m.data()[(x * h + c) * n + i] = t.data()[(x * n + i) * h + c];
    return m;
  });
  if (!opt.expert.bias) return;
  const Tensor b_in = w.host(p + "gate_up_proj_bias", {e, 2 * n});
  Tensor b_in_rows({e * 2 * n});
  for (int64_t x = 0; x < e; ++x)
    for (int64_t c = 0; c < 2 * n; ++c)
      b_in_rows.data()[x * 2 * n + gate_up_row(c)] = b_in.data()[x * 2 * n + c];
  out.b_in = w.upload(b_in_rows, DType::F32);
  const Tensor b_down = w.host(p + "down_proj_bias", {e, h});
  Tensor b_down_rows({e * h});
  std::copy(b_down.data(), b_down.data() + e * h, b_down_rows.data());
  out.b_down = w.upload(b_down_rows, DType::F32);
}

}  // namespace

ExpertWeights MoELayer::load_experts(ParamLoader& w, const std::string& prefix,
                                     const MoEOptions& opt) {
  const ExpertMlpSpec& x = opt.expert;
  if (x.activation == Activation::ClampedSwiglu && !x.gated)
    fail("{}: the clamped SwiGLU needs gated experts", prefix);
  ExpertWeights out;
  out.num_experts = opt.router.num_experts;
  out.hidden = opt.hidden_size;
  out.intermediate = x.intermediate_size;
  out.gated = x.gated;
  out.activation = x.activation;
  if (opt.storage == ExpertStorage::StackedInterleaved) {
    if (!x.gated) fail("{}: stacked interleaved experts are gated (gate|up)", prefix);
    load_stacked_interleaved(w, prefix, opt, out);
  } else {
    load_per_expert(w, prefix, opt, out);
  }
  return out;
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
