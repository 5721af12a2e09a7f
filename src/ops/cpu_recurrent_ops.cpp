#include "ops/cpu_recurrent_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/delta_rule.h"
#include "kernels/cpu/mamba.h"
#include "kernels/cpu/ops.h"

namespace strata::cpu_ops {

namespace {

void check_host(const Tensor& t, DType dtype, const char* what) {
  STRATA_CHECK(t.on_host() && t.dtype() == dtype, "cpu op {}: a {} tensor", what, t.describe());
}

struct Seq {
  int begin, len, slot;
  bool resumes;
};

std::vector<Seq> read_seqs(const Tensor& seqs, int64_t tokens, int64_t slots) {
  check_host(seqs, DType::I32, "seqs");
  STRATA_CHECK(seqs.cols() == kStateSeqInts && seqs.contiguous(), "seqs {}", seqs.describe());
  std::vector<Seq> out;
  const int32_t* s = seqs.ptr<int32_t>();
  for (int64_t b = 0; b < seqs.rows(); ++b, s += kStateSeqInts) {
    const Seq q{s[0], s[1], s[2], s[3] != 0};
    STRATA_CHECK(
        q.begin >= 0 && q.len >= 0 && q.begin + q.len <= tokens && q.slot >= 0 && q.slot < slots,
        "request {}: tokens [{}, +{}) of {}, state slot {} of {}", b, q.begin, q.len, tokens,
        q.slot, slots);
    out.push_back(q);
  }
  return out;
}

// A request's recurrent state as f32 for a scan: in place when stored so, else a copy of the
// bf16 values that store() rounds back.
class F32State {
 public:
  F32State(Tensor& states, int64_t numel)
      : states_(states), numel_(numel), f32_(states.dtype() == DType::F32) {
    if (!f32_) scratch_.resize(static_cast<size_t>(numel));
  }
  // The state of q's slot: zeros for a request that does not resume, else its stored values.
  float* load(const Seq& q) {
    float* s = f32_ ? states_.ptr<float>() + q.slot * numel_ : scratch_.data();
    if (!q.resumes)
      std::fill_n(s, numel_, 0.0f);
    else if (!f32_)
      convert_to_f32(DType::BF16, states_.ptr<uint16_t>() + q.slot * numel_, s, numel_);
    return s;
  }
  void store(const Seq& q) {
    if (f32_) return;
    uint16_t* stored = states_.ptr<uint16_t>() + q.slot * numel_;
    for (int64_t i = 0; i < numel_; ++i) stored[i] = f32_to_bf16(scratch_[i]);
  }

 private:
  Tensor& states_;
  int64_t numel_;
  bool f32_;
  std::vector<float> scratch_;
};

}  // namespace

void causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, bool silu,
                   const Tensor& seqs, Tensor& conv_states, Tensor& out) {
  check_host(x, DType::F32, "causal_conv1d input");
  check_host(weight, DType::F32, "causal_conv1d weight");
  check_host(conv_states, DType::F32, "causal_conv1d state");
  check_host(out, DType::F32, "causal_conv1d output");
  const int channels = static_cast<int>(x.cols()), kernel = static_cast<int>(weight.cols());
  STRATA_CHECK(weight.rows() == channels && out.cols() == channels && out.rows() == x.rows() &&
                   out.contiguous() && conv_states.cols() == int64_t{channels} * (kernel - 1) &&
                   conv_states.contiguous() && (!bias || bias->numel() == channels),
               "causal_conv1d {} * {} -> {} with state {}", x.describe(), weight.describe(),
               out.describe(), conv_states.describe());
  for (const Seq& q : read_seqs(seqs, x.rows(), conv_states.rows())) {
    if (q.len == 0) continue;
    float* state = conv_states.ptr<float>() + q.slot * conv_states.cols();
    if (!q.resumes) std::fill_n(state, conv_states.cols(), 0.0f);
    cpu::causal_conv1d(x.ptr<float>() + q.begin * x.row_stride(), x.row_stride(), q.len, channels,
                       weight.ptr<float>(), bias ? bias->ptr<float>() : nullptr, kernel, state,
                       out.ptr<float>() + q.begin * channels, silu);
  }
}

void ssm_scan(const Tensor& xbc, const Tensor& dt, const SsmParams& p, const Tensor& seqs,
              bool decode, Tensor& states, Tensor& y) {
  check_host(xbc, DType::F32, "ssm_scan input");
  check_host(dt, DType::F32, "ssm_scan dt");
  check_host(y, DType::F32, "ssm_scan output");
  STRATA_CHECK(states.on_host() && (states.dtype() == DType::F32 || states.dtype() == DType::BF16),
               "ssm_scan state {}", states.describe());
  const int H = p.num_heads, P = p.head_dim, N = p.state_size, G = p.n_groups;
  const int64_t inner = int64_t{H} * P, state_numel = inner * N;
  STRATA_CHECK(xbc.cols() == inner + 2 * int64_t{G} * N && dt.cols() == H &&
                   dt.rows() == xbc.rows() && y.cols() == inner && y.rows() == xbc.rows() &&
                   y.contiguous() && states.cols() == state_numel && states.contiguous() &&
                   H % G == 0 && p.chunk_size >= 1,
               "ssm_scan {} dt {} -> {} with state {}", xbc.describe(), dt.describe(), y.describe(),
               states.describe());
  const int64_t T = xbc.rows();
  // dt = clamp(softplus(dt_raw + dt_bias)) for every token and head.
  std::vector<float> dt_act(static_cast<size_t>(T) * H);
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      dt_act[t * H + h] = std::clamp(
          cpu::softplus(dt.ptr<float>()[t * dt.row_stride() + h] + p.dt_bias.ptr<float>()[h]),
          p.dt_min, p.dt_max);
  F32State state(states, state_numel);
  for (const Seq& q : read_seqs(seqs, T, states.rows())) {
    if (q.len == 0) continue;
    float* S = state.load(q);
    cpu::SsmScanArgs a;
    a.num_heads = H;
    a.head_dim = P;
    a.n_groups = G;
    a.state_size = N;
    a.len = q.len;
    a.x = xbc.ptr<float>() + q.begin * xbc.row_stride();
    a.B = a.x + inner;
    a.C = a.B + int64_t{G} * N;
    a.stride = xbc.row_stride();
    a.dt = dt_act.data() + int64_t{q.begin} * H;
    a.A = p.A.ptr<float>();
    a.D = p.D.ptr<float>();
    float* yq = y.ptr<float>() + q.begin * inner;
    if (decode)
      cpu::ssm_scan_sequential(a, S, yq);
    else
      cpu::ssm_scan_chunked(a, p.chunk_size, S, yq);
    state.store(q);
  }
}

void gated_delta_rule(const Tensor& qkv, const Tensor& b, const Tensor& a, const DeltaNetParams& p,
                      const Tensor& seqs, bool decode, Tensor& states, Tensor& y) {
  check_host(qkv, DType::F32, "gated_delta_rule input");
  check_host(b, DType::F32, "gated_delta_rule b");
  check_host(a, DType::F32, "gated_delta_rule a");
  check_host(y, DType::F32, "gated_delta_rule output");
  STRATA_CHECK(states.on_host() && (states.dtype() == DType::F32 || states.dtype() == DType::BF16),
               "gated_delta_rule state {}", states.describe());
  const int HK = p.num_k_heads, HV = p.num_v_heads, DK = p.k_dim, DV = p.v_dim;
  const int64_t qk = int64_t{HK} * DK, state_numel = int64_t{HV} * DK * DV, T = qkv.rows();
  STRATA_CHECK(HK > 0 && HV % HK == 0 && qkv.cols() == 2 * qk + int64_t{HV} * DV &&
                   b.cols() == HV && a.cols() == HV && b.rows() == T && a.rows() == T &&
                   y.cols() == int64_t{HV} * DV && y.rows() == T && y.contiguous() &&
                   states.cols() == state_numel && states.contiguous() && p.chunk_size >= 1,
               "gated_delta_rule {} b {} a {} -> {} with state {}", qkv.describe(), b.describe(),
               a.describe(), y.describe(), states.describe());
  std::vector<float> beta(static_cast<size_t>(T) * HV), g(beta.size());
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < HV; ++h) {
      beta[t * HV + h] = 1.0f / (1.0f + std::exp(-b.ptr<float>()[t * b.row_stride() + h]));
      g[t * HV + h] = p.A.ptr<float>()[h] * cpu::softplus(a.ptr<float>()[t * a.row_stride() + h] +
                                                          p.dt_bias.ptr<float>()[h]);
    }
  F32State state(states, state_numel);
  for (const Seq& q : read_seqs(seqs, T, states.rows())) {
    if (q.len == 0) continue;
    float* S = state.load(q);
    cpu::DeltaRuleArgs d;
    d.num_k_heads = HK;
    d.num_v_heads = HV;
    d.k_dim = DK;
    d.v_dim = DV;
    d.len = q.len;
    d.q = qkv.ptr<float>() + q.begin * qkv.row_stride();
    d.k = d.q + qk;
    d.v = d.k + qk;
    d.stride = qkv.row_stride();
    d.beta = beta.data() + int64_t{q.begin} * HV;
    d.g = g.data() + int64_t{q.begin} * HV;
    float* yq = y.ptr<float>() + q.begin * y.cols();
    if (decode)
      cpu::delta_rule_sequential(d, S, yq);
    else
      cpu::delta_rule_chunked(d, p.chunk_size, S, yq);
    state.store(q);
  }
}

void gated_rms_norm(const Tensor& y, const Tensor& z, const Tensor* weight, int groups, float eps,
                    bool norm_before_gate, Tensor& out, Ops::SpanningGroups spanning) {
  check_host(y, DType::F32, "gated_rms_norm input");
  check_host(z, DType::F32, "gated_rms_norm gate");
  check_host(out, DType::F32, "gated_rms_norm output");
  const int width = static_cast<int>(y.cols());
  STRATA_CHECK(y.contiguous() && z.cols() == width && z.rows() == y.rows() && out.contiguous() &&
                   out.cols() == width && out.rows() == y.rows() && groups >= 1 &&
                   width % groups == 0 && (!weight || weight->numel() == width),
               "gated_rms_norm {} gate {} -> {} in {} groups", y.describe(), z.describe(),
               out.describe(), groups);
  const Tensor* sums = spanning.sums;
  if (sums) {
    check_host(*sums, DType::F32, "gated_rms_norm group sums");
    STRATA_CHECK(
        sums->rows() == y.rows() && sums->cols() == groups && spanning.width >= width / groups,
        "gated_rms_norm group sums {} for {} rows of {} groups, group width {}", sums->describe(),
        y.rows(), groups, spanning.width);
  }
  if (out.raw() != y.raw()) std::memcpy(out.raw(), y.raw(), y.bytes());
  cpu::gated_rms_norm(out.ptr<float>(), z.ptr<float>(), z.row_stride(), y.rows(), width, groups,
                      weight ? weight->ptr<float>() : nullptr, eps, norm_before_gate,
                      sums ? sums->ptr<float>() : nullptr, sums ? sums->row_stride() : 0,
                      spanning.width);
}

void gated_sum_squares(const Tensor& y, const Tensor& z, int groups, bool norm_before_gate,
                       Tensor& sums) {
  check_host(y, DType::F32, "gated_sum_squares input");
  check_host(z, DType::F32, "gated_sum_squares gate");
  check_host(sums, DType::F32, "gated_sum_squares output");
  const int width = static_cast<int>(y.cols());
  STRATA_CHECK(y.contiguous() && z.cols() == width && z.rows() == y.rows() && groups >= 1 &&
                   width % groups == 0 && sums.rows() == y.rows() && sums.cols() == groups,
               "gated_sum_squares {} gate {} -> {} in {} groups", y.describe(), z.describe(),
               sums.describe(), groups);
  cpu::gated_sum_squares(y.ptr<float>(), z.ptr<float>(), z.row_stride(), y.rows(), width, groups,
                         norm_before_gate, sums.ptr<float>(), sums.row_stride());
}

}  // namespace strata::cpu_ops
