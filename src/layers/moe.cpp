#include "layers/moe.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

namespace {

// This TP rank's intermediate columns of an expert-shaped MLP.
Shard intermediate_shard(ParamLoader& w, const std::string& prefix, int intermediate) {
  const Communicator& group = w.tensor_parallel();
  STRATA_CHECK(intermediate % group.size() == 0, "{}: intermediate size {} over {} ranks", prefix,
               intermediate, group.size());
  return Shard{group.rank(), group.size()};
}

}  // namespace

ExpertMlp::ExpertMlp(ParamLoader& w, const std::string& prefix, int hidden,
                     const ExpertMlpSpec& spec)
    : spec_(spec) {
  const int64_t inter = spec.intermediate_size;
  const Shard columns = intermediate_shard(w, prefix, spec.intermediate_size);
  spec_.intermediate_size = static_cast<int>(columns.size(inter));
  in_ = spec.gated
            ? Linear::load_column_parallel(w, {prefix + "." + spec.gate, prefix + "." + spec.up},
                                           hidden, {inter, inter}, {columns, columns}, spec.bias)
            : Linear::load_column_parallel(w, {prefix + "." + spec.up}, hidden, {inter}, {columns},
                                           spec.bias);
  down_ = Linear::load_row_parallel(w, prefix + "." + spec.down, inter, hidden, spec.bias);
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
  if (w.tensor_parallel().size() > 1) reduce_over_ = &w.tensor_parallel();
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
  const Shard columns = intermediate_shard(w, prefix, x.intermediate_size);
  std::vector<std::string> in_names, down_names, down_weights;
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
    down_weights.push_back(p + x.down + ".weight");
    down_rows.push_back(opt.hidden_size);
  }
  const std::vector<Shard> in_shards(in_names.size(), columns);
  out.w_in = w.matrix_rows(in_names, opt.hidden_size, in_rows, in_shards);
  out.w_down = w.matrix_cols(down_weights, opt.hidden_size, x.intermediate_size, columns);
  out.b_in = w.biases(in_names, in_rows, x.bias, in_shards);
  // Every rank's partial sum would carry it: rank 0 alone adds the down bias.
  out.b_down = w.biases(down_names, down_rows, x.bias && columns.index == 0);
}

// gpt-oss's [E, in, out] tensors with interleaved gate|up columns: expert e's gate rows then
// its up rows, each [out, in] (this TP rank's intermediate rows `columns` of them).
void load_stacked_interleaved(ParamLoader& w, const std::string& prefix, const MoEOptions& opt,
                              ExpertWeights& out) {
  const int64_t e = opt.router.num_experts, h = opt.hidden_size, n = opt.expert.intermediate_size;
  const Shard columns = intermediate_shard(w, prefix, opt.expert.intermediate_size);
  const int64_t first = columns.begin(n), local = columns.size(n);
  const std::string p = prefix + "." + opt.experts + ".";
  // Stored column 2i of gate_up is gate row i, column 2i + 1 up row i; local row j is row
  // first + j of each.
  out.w_in = w.matrix_rearranged(
      p + "gate_up_proj", {e, h, 2 * n}, e * 2 * local, h, [&](const Tensor& t) {
        Tensor m({e * 2 * local, h});
        for (int64_t x = 0; x < e; ++x)
          for (int64_t i = 0; i < h; ++i)
            for (int64_t j = 0; j < local; ++j) {
              const float* stored = t.data() + (x * h + i) * 2 * n + 2 * (first + j);
              m.data()[(x * 2 * local + j) * h + i] = stored[0];
              m.data()[(x * 2 * local + local + j) * h + i] = stored[1];
            }
        return m;
      });
  out.w_down = w.matrix_rearranged(p + "down_proj", {e, n, h}, e * h, local, [&](const Tensor& t) {
    Tensor m({e * h, local});
    for (int64_t x = 0; x < e; ++x)
      for (int64_t j = 0; j < local; ++j)
        for (int64_t c = 0; c < h; ++c)
          m.data()[(x * h + c) * local + j] = t.data()[(x * n + first + j) * h + c];
    return m;
  });
  if (!opt.expert.bias) return;
  const Tensor b_in = w.host(p + "gate_up_proj_bias", {e, 2 * n});
  Tensor b_in_rows({e * 2 * local});
  for (int64_t x = 0; x < e; ++x)
    for (int64_t j = 0; j < local; ++j) {
      b_in_rows.data()[x * 2 * local + j] = b_in.data()[x * 2 * n + 2 * (first + j)];
      b_in_rows.data()[x * 2 * local + local + j] = b_in.data()[x * 2 * n + 2 * (first + j) + 1];
    }
  out.b_in = w.upload(b_in_rows, DType::F32);
  // Every rank's partial sum would carry it: rank 0 alone adds the down bias.
  if (columns.index != 0) return;
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
  out.intermediate = static_cast<int>(
      intermediate_shard(w, prefix, x.intermediate_size).size(x.intermediate_size));
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
  if (reduce_over_) {
    // This rank's columns of every chosen expert: a part of the output, summed over the group.
    Tensor routed = ops.zeros({t, residual.cols()});
    ops.experts(experts_, x, ids, weights, routed);
    reduce_over_->all_reduce_sum(routed);
    ops.add(residual, routed);
  } else {
    ops.experts(experts_, x, ids, weights, residual);
  }
  if (!has_shared_) return;
  Tensor shared = shared_.forward(ops, x);
  if (shared_gate_.loaded())  // Qwen2-MoE / Qwen3-Next: shared(x) * sigmoid(x . w_gate)
    ops.mul(shared, shared_gate_.forward(ops, x), true, shared);
  ops.add(residual, shared);
}

}  // namespace strata
