// CudaOps' recurrent-layer ops (Mamba2): shape checks here, kernels in kernels/cuda/mamba.cu.
// The same contracts as the CPU reference (ops/cpu_recurrent_ops.cpp): every request of the pass
// in one launch, its tokens and state slot read on the device from `seqs`.
#include "core/error.h"
#include "kernels/cuda/delta_rule.h"
#include "kernels/cuda/mamba.h"
#include "ops/cuda/cuda_ops.h"

namespace strata {

namespace {

void check_f32(const Tensor& t, Device d, const char* what) {
  STRATA_CHECK(t.device() == d && t.dtype() == DType::F32,
               "cuda op {}: a {} tensor (wants f32 on {})", what, t.describe(), d.str());
}

void check_seqs(const Tensor& seqs, Device d) {
  STRATA_CHECK(seqs.device() == d && seqs.dtype() == DType::I32 && seqs.contiguous() &&
                   seqs.cols() == kStateSeqInts,
               "cuda recurrent op: seqs {}", seqs.describe());
}

}  // namespace

void CudaOps::scale_columns(Tensor& x, const Tensor& scale) {
  check_f32(x, device(), "scale_columns");
  check_f32(scale, device(), "scale_columns multipliers");
  STRATA_CHECK(scale.numel() == x.cols(), "scale_columns {} by {}", x.describe(), scale.describe());
  cuda::scale_columns(x.ptr<float>(), x.row_stride(), x.rows(), x.cols(), scale.ptr<float>(),
                      stream_);
}

void CudaOps::causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, bool silu,
                            const Tensor& seqs, Tensor& conv_states, Tensor& out) {
  check_f32(x, device(), "causal_conv1d input");
  check_f32(weight, device(), "causal_conv1d weight");
  check_f32(conv_states, device(), "causal_conv1d state");
  check_f32(out, device(), "causal_conv1d output");
  check_seqs(seqs, device());
  const int channels = static_cast<int>(x.cols()), kernel = static_cast<int>(weight.cols());
  STRATA_CHECK(weight.rows() == channels && weight.contiguous() && out.cols() == channels &&
                   out.rows() == x.rows() && out.contiguous() &&
                   conv_states.cols() == int64_t{channels} * (kernel - 1) &&
                   conv_states.contiguous() && (!bias || bias->numel() == channels),
               "causal_conv1d {} * {} -> {} with state {}", x.describe(), weight.describe(),
               out.describe(), conv_states.describe());
  if (bias) check_f32(*bias, device(), "causal_conv1d bias");
  cuda::causal_conv1d(x.ptr<float>(), x.row_stride(), x.rows(), channels, weight.ptr<float>(),
                      bias ? bias->ptr<float>() : nullptr, kernel, silu, seqs.ptr<int32_t>(),
                      static_cast<int>(seqs.rows()), conv_states.ptr<float>(), out.ptr<float>(),
                      stream_);
}

void CudaOps::ssm_scan(const Tensor& xbc, const Tensor& dt, const SsmParams& p, const Tensor& seqs,
                       bool decode, Tensor& states, Tensor& y) {
  check_f32(xbc, device(), "ssm_scan input");
  check_f32(dt, device(), "ssm_scan dt");
  check_f32(y, device(), "ssm_scan output");
  for (const Tensor* t : {&p.A, &p.D, &p.dt_bias}) check_f32(*t, device(), "ssm_scan parameter");
  check_seqs(seqs, device());
  STRATA_CHECK(states.device() == device() &&
                   (states.dtype() == DType::F32 || states.dtype() == DType::BF16),
               "ssm_scan state {}", states.describe());
  const int64_t inner = int64_t{p.num_heads} * p.head_dim;
  STRATA_CHECK(xbc.cols() == inner + 2 * int64_t{p.n_groups} * p.state_size &&
                   dt.cols() == p.num_heads && dt.rows() == xbc.rows() && y.cols() == inner &&
                   y.rows() == xbc.rows() && y.contiguous() &&
                   states.cols() == inner * p.state_size && states.contiguous() &&
                   p.n_groups >= 1 && p.num_heads % p.n_groups == 0 && p.chunk_size >= 1,
               "ssm_scan {} dt {} -> {} with state {}", xbc.describe(), dt.describe(), y.describe(),
               states.describe());
  cuda::SsmShape shape;
  shape.num_heads = p.num_heads;
  shape.head_dim = p.head_dim;
  shape.n_groups = p.n_groups;
  shape.state_size = p.state_size;
  shape.chunk_size = p.chunk_size;
  shape.dt_min = p.dt_min;
  shape.dt_max = p.dt_max;
  cuda::ssm_scan(xbc.ptr<float>(), xbc.row_stride(), dt.ptr<float>(), dt.row_stride(),
                 p.A.ptr<float>(), p.D.ptr<float>(), p.dt_bias.ptr<float>(), shape,
                 seqs.ptr<int32_t>(), static_cast<int>(seqs.rows()), decode, states.raw(),
                 states.dtype(), y.ptr<float>(), stream_);
}

void CudaOps::gated_delta_rule(const Tensor& qkv, const Tensor& b, const Tensor& a,
                               const DeltaNetParams& p, const Tensor& seqs, bool /*decode*/,
                               Tensor& states, Tensor& y) {
  check_f32(qkv, device(), "gated_delta_rule input");
  check_f32(b, device(), "gated_delta_rule b");
  check_f32(a, device(), "gated_delta_rule a");
  check_f32(y, device(), "gated_delta_rule output");
  for (const Tensor* t : {&p.A, &p.dt_bias}) check_f32(*t, device(), "gated_delta_rule parameter");
  check_seqs(seqs, device());
  const int HK = p.num_k_heads, HV = p.num_v_heads, DK = p.k_dim, DV = p.v_dim;
  const int64_t qk = int64_t{HK} * DK, T = qkv.rows();
  STRATA_CHECK(HK > 0 && HV % HK == 0 && qkv.cols() == 2 * qk + int64_t{HV} * DV &&
                   b.cols() == HV && a.cols() == HV && b.rows() == T && a.rows() == T &&
                   y.cols() == int64_t{HV} * DV && y.rows() == T && y.contiguous() &&
                   states.device() == device() &&
                   (states.dtype() == DType::F32 || states.dtype() == DType::BF16) &&
                   states.cols() == int64_t{HV} * DK * DV && states.contiguous(),
               "gated_delta_rule {} b {} a {} -> {} with state {}", qkv.describe(), b.describe(),
               a.describe(), y.describe(), states.describe());
  // Decode and prefill take the same kernel: the recurrence, token by token per (head, request).
  cuda::DeltaRuleShape sh{HK, HV, DK, DV};
  cuda::gated_delta_rule(qkv.ptr<float>(), qkv.row_stride(), b.ptr<float>(), b.row_stride(),
                         a.ptr<float>(), a.row_stride(), p.A.ptr<float>(), p.dt_bias.ptr<float>(),
                         sh, seqs.ptr<int32_t>(), static_cast<int>(seqs.rows()), states.raw(),
                         states.dtype(), y.ptr<float>(), stream_);
}

void CudaOps::gated_rms_norm(const Tensor& y, const Tensor& z, const Tensor* weight, int groups,
                             float eps, bool norm_before_gate, Tensor& out,
                             SpanningGroups spanning) {
  check_f32(y, device(), "gated_rms_norm input");
  check_f32(z, device(), "gated_rms_norm gate");
  const int width = static_cast<int>(y.cols());
  STRATA_CHECK(out.device() == device() &&
                   (out.dtype() == DType::F32 || out.dtype() == DType::BF16) && y.contiguous() &&
                   z.cols() == width && z.rows() == y.rows() && out.cols() == width &&
                   out.rows() == y.rows() && groups >= 1 && width % groups == 0 &&
                   (!weight || weight->numel() == width),
               "gated_rms_norm {} gate {} -> {} in {} groups", y.describe(), z.describe(),
               out.describe(), groups);
  if (weight) check_f32(*weight, device(), "gated_rms_norm weight");
  const Tensor* sums = spanning.sums;
  if (sums) {
    check_f32(*sums, device(), "gated_rms_norm group sums");
    STRATA_CHECK(
        sums->rows() == y.rows() && sums->cols() == groups && spanning.width >= width / groups,
        "gated_rms_norm group sums {} for {} rows of {} groups, group width {}", sums->describe(),
        y.rows(), groups, spanning.width);
  }
  cuda::gated_rms_norm(y.ptr<float>(), z.ptr<float>(), z.row_stride(), y.rows(), width, groups,
                       weight ? weight->ptr<float>() : nullptr, eps, norm_before_gate,
                       sums ? sums->ptr<float>() : nullptr, sums ? sums->row_stride() : 0,
                       spanning.width, out.raw(), out.dtype(), out.row_stride(), stream_);
}

void CudaOps::gated_sum_squares(const Tensor& y, const Tensor& z, int groups, bool norm_before_gate,
                                Tensor& sums) {
  check_f32(y, device(), "gated_sum_squares input");
  check_f32(z, device(), "gated_sum_squares gate");
  check_f32(sums, device(), "gated_sum_squares output");
  const int width = static_cast<int>(y.cols());
  STRATA_CHECK(y.contiguous() && z.cols() == width && z.rows() == y.rows() && groups >= 1 &&
                   width % groups == 0 && sums.rows() == y.rows() && sums.cols() == groups,
               "gated_sum_squares {} gate {} -> {} in {} groups", y.describe(), z.describe(),
               sums.describe(), groups);
  cuda::gated_sum_squares(y.ptr<float>(), z.ptr<float>(), z.row_stride(), y.rows(), width, groups,
                          norm_before_gate, sums.ptr<float>(), sums.row_stride(), stream_);
}

}  // namespace strata
