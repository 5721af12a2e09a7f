#include "layers/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace strata {

void RouterConfig::validate() const {
  if (num_experts <= 0) fail("config.json: MoE needs n_routed_experts > 0, got {}", num_experts);
  if (top_k <= 0 || top_k > num_experts)
    fail("config.json: num_experts_per_tok {} must be between 1 and the {} routed experts", top_k,
         num_experts);
  if (num_groups <= 0 || num_experts % num_groups != 0)
    fail("config.json: n_group {} must divide n_routed_experts {}", num_groups, num_experts);
  if (topk_groups <= 0 || topk_groups > num_groups)
    fail("config.json: topk_group {} must be between 1 and n_group {}", topk_groups, num_groups);
  const int per_group = num_experts / num_groups;
  if (group_score == GroupScore::TopTwoSum && num_groups > 1 && per_group < 2)
    fail(
        "config.json: grouped routing ranks groups by their two best experts, so each of the {} "
        "groups needs at least 2 experts (n_routed_experts {})",
        num_groups, num_experts);
  if (top_k > topk_groups * per_group)
    fail(
        "config.json: num_experts_per_tok {} exceeds the {} experts in the topk_group {} groups "
        "a token may use: raise topk_group or lower num_experts_per_tok",
        top_k, topk_groups * per_group, topk_groups);
}

namespace {

// Indices of the `k` largest values, largest first; ties go to the lower index (as torch.topk
// does on CPU for the small sizes routers use).
std::vector<int> top_indices(const float* v, int n, int k) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  idx.resize(k);
  return idx;
}

}  // namespace

void route_tokens(const RouterConfig& cfg, const float* router_logits, int64_t rows,
                  const float* bias, int32_t* expert_ids, float* weights) {
  const int e = cfg.num_experts, k = cfg.top_k;
  const int per_group = e / cfg.num_groups;
  std::vector<float> scores(e), choice(e), group_scores(cfg.num_groups);
  for (int64_t r = 0; r < rows; ++r) {
    const float* logits = router_logits + r * e;
    if (cfg.scoring == RouterScoring::Softmax) {
      const float m = *std::max_element(logits, logits + e);
      float sum = 0.0f;
      for (int i = 0; i < e; ++i) sum += scores[i] = std::exp(logits[i] - m);
      for (int i = 0; i < e; ++i) scores[i] /= sum;
    } else {
      for (int i = 0; i < e; ++i) scores[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    }
    for (int i = 0; i < e; ++i) choice[i] = scores[i] + (cfg.correction_bias ? bias[i] : 0.0f);

    if (cfg.num_groups > 1) {
      for (int g = 0; g < cfg.num_groups; ++g) {
        const float* c = choice.data() + g * per_group;
        if (cfg.group_score == GroupScore::Max) {
          group_scores[g] = *std::max_element(c, c + per_group);
        } else {
          const auto best = top_indices(c, per_group, 2);
          group_scores[g] = c[best[0]] + c[best[1]];
        }
      }
      std::vector<bool> kept(cfg.num_groups, false);
      for (int g : top_indices(group_scores.data(), cfg.num_groups, cfg.topk_groups))
        kept[g] = true;
      // transformers masks the other groups' experts to 0 (not -inf); kept identical on purpose.
      for (int i = 0; i < e; ++i)
        if (!kept[i / per_group]) choice[i] = 0.0f;
    }

    const auto chosen = top_indices(choice.data(), e, k);
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) {
      expert_ids[r * k + j] = chosen[j];
      sum += weights[r * k + j] = scores[chosen[j]];
    }
    const float norm = cfg.normalize_topk ? 1.0f / (sum + 1e-20f) : 1.0f;
    for (int j = 0; j < k; ++j) weights[r * k + j] *= norm * cfg.routed_scaling_factor;
  }
}

ExpertActivation parse_expert_activation(const std::string& act) {
  if (act == "silu" || act == "swish") return ExpertActivation::Silu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") return ExpertActivation::GeluTanh;
  if (act == "relu2") return ExpertActivation::Relu2;
  fail(
      "config.json: expert activation '{}' is not supported (supported: silu, gelu_pytorch_tanh, "
      "relu2)",
      act);
}

ExpertMlp::ExpertMlp(WeightSource& w, const std::string& prefix, int hidden,
                     const ExpertMlpSpec& spec)
    : spec_(spec) {
  if (!spec.gated && spec.activation == ExpertActivation::GeluTanh)
    fail("{}: plain (ungated) gelu experts are not supported; use gated gelu or relu2", prefix);
  const int64_t inter = spec.intermediate_size;
  in_ = spec.gated ? Linear::load_stacked(w, {prefix + "." + spec.gate, prefix + "." + spec.up},
                                          hidden, {inter, inter}, spec.bias)
                   : Linear::load(w, prefix + "." + spec.up, hidden, inter, spec.bias);
  down_ = Linear::load(w, prefix + "." + spec.down, inter, hidden, spec.bias);
}

void ExpertMlp::forward(const float* x, int64_t rows, float* y) const {
  const int64_t inter = spec_.intermediate_size;
  std::vector<float> h(static_cast<size_t>(rows) * in_.out_features());
  in_.forward(x, rows, h.data());
  std::vector<float> act(static_cast<size_t>(rows) * inter);
  if (spec_.gated && spec_.activation == ExpertActivation::Silu) {
    cpu::silu_and_mul(h.data(), rows, inter, act.data());
  } else if (spec_.gated && spec_.activation == ExpertActivation::GeluTanh) {
    cpu::gelu_tanh_and_mul(h.data(), rows, inter, act.data());
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const float* g = h.data() + r * in_.out_features();  // gate (gated) or up (plain)
      const float* u = spec_.gated ? g + inter : nullptr;
      for (int64_t i = 0; i < inter; ++i) {
        // silu or relu^2 here: ungated gelu is refused at construction.
        const float a = spec_.activation == ExpertActivation::Relu2
                            ? (g[i] > 0.0f ? g[i] * g[i] : 0.0f)
                            : cpu::silu(g[i]);
        act[r * inter + i] = u ? a * u[i] : a;
      }
    }
  }
  down_.forward(act.data(), rows, y);
}

MoELayer::MoELayer(WeightSource& w, const std::string& prefix, const MoEOptions& opt) : opt_(opt) {
  opt.router.validate();
  const int e = opt.router.num_experts;
  router_ = Linear::load(w, prefix + "." + opt.router_gate, opt.hidden_size, e, false);
  if (opt.router.correction_bias) bias_ = w.load(prefix + "." + opt.correction_bias, {e});
  experts_.reserve(e);
  for (int i = 0; i < e; ++i)
    experts_.emplace_back(w, fmt::format("{}.{}.{}", prefix, opt.experts, i), opt.hidden_size,
                          opt.expert);
  has_shared_ = opt.shared_expert.intermediate_size > 0;
  if (has_shared_)
    shared_ = ExpertMlp(w, prefix + "." + opt.shared, opt.hidden_size, opt.shared_expert);
  if (has_shared_ && !opt.shared_gate.empty())
    shared_gate_ = Linear::load(w, prefix + "." + opt.shared_gate, opt.hidden_size, 1, false);
}

Tensor MoELayer::forward(const Tensor& x) const {
  const int64_t t = x.dim(0), hidden = opt_.hidden_size;
  const int k = opt_.router.top_k, e = opt_.router.num_experts;
  Tensor logits = router_.forward(x);
  std::vector<int32_t> ids(static_cast<size_t>(t) * k);
  std::vector<float> weights(ids.size());
  route_tokens(opt_.router, logits.data(), t, bias_.empty() ? nullptr : bias_.data(), ids.data(),
               weights.data());

  // Group the (token, slot) pairs by expert so each expert runs one GEMM over its tokens.
  std::vector<std::vector<int64_t>> assigned(e);
  for (int64_t i = 0; i < t * k; ++i) assigned[ids[i]].push_back(i);

  Tensor out({t, hidden});
  std::vector<float> in_rows, out_rows;
  for (int ex = 0; ex < e; ++ex) {
    const auto& pairs = assigned[ex];
    if (pairs.empty()) continue;
    const int64_t n = static_cast<int64_t>(pairs.size());
    in_rows.resize(n * hidden);
    out_rows.resize(n * hidden);
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(in_rows.data() + j * hidden, x.row(pairs[j] / k), sizeof(float) * hidden);
    experts_[ex].forward(in_rows.data(), n, out_rows.data());
    for (int64_t j = 0; j < n; ++j) {
      float* o = out.row(pairs[j] / k);
      const float wgt = weights[pairs[j]];
      for (int64_t d = 0; d < hidden; ++d) o[d] += wgt * out_rows[j * hidden + d];
    }
  }
  if (has_shared_) {
    Tensor shared({t, hidden});
    shared_.forward(x.data(), t, shared.data());
    Tensor gate = shared_gate_.out_features() > 0 ? shared_gate_.forward(x) : Tensor();
    for (int64_t r = 0; r < t; ++r) {
      const float g = gate.empty() ? 1.0f : 1.0f / (1.0f + std::exp(-gate.data()[r]));
      for (int64_t d = 0; d < hidden; ++d) out.row(r)[d] += g * shared.row(r)[d];
    }
  }
  return out;
}

}  // namespace strata
