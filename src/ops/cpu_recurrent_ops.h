#pragma once
// The CPU reference of the recurrent-layer ops (Ops::causal_conv1d, ssm_scan, gated_rms_norm):
// a loop over the pass's requests around the kernels of kernels/cpu/mamba.h. CpuOps calls these.
#include "ops/ops.h"

namespace strata::cpu_ops {

void causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, bool silu,
                   const Tensor& seqs, Tensor& conv_states, Tensor& out);
void ssm_scan(const Tensor& xbc, const Tensor& dt, const SsmParams& p, const Tensor& seqs,
              bool decode, Tensor& states, Tensor& y);
void gated_delta_rule(const Tensor& qkv, const Tensor& b, const Tensor& a, const DeltaNetParams& p,
                      const Tensor& seqs, bool decode, Tensor& states, Tensor& y);
void gated_sum_squares(const Tensor& y, const Tensor& z, int groups, bool norm_before_gate,
                       Tensor& sums);
void gated_rms_norm(const Tensor& y, const Tensor& z, const Tensor* weight, int groups, float eps,
                    bool norm_before_gate, Tensor& out, Ops::SpanningGroups spanning);

}  // namespace strata::cpu_ops
