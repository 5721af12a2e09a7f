#pragma once
// The CUDA kernel of the gated delta rule behind CudaOps::gated_delta_rule (ops/ops.h);
// kernels/cpu/delta_rule.h is the reference it is tested against (ops_device_test). Every
// request of a pass is served by one launch (seqs as in kernels/cuda/mamba.h). One block per
// (value head, request) keeps the head's state [k_dim, v_dim] in shared memory in f32 across
// the request's tokens and runs the recurrence token by token: decode and prefill compute the
// same sums, so the state carried across chunks and passes is exact.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace strata::cuda {

struct DeltaRuleShape {
  int num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
};

// y [T, v_heads * v_dim] f32 (contiguous) from qkv [T, *] (q | k | v, row stride qkv_stride),
// b, a [T, v_heads] (row strides b_stride, a_stride), A, dt_bias [v_heads]; states [slots,
// v_heads * k_dim * v_dim] (`state_dtype` f32 or bf16) read and updated.
void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* b, int64_t b_stride,
                      const float* a, int64_t a_stride, const float* A, const float* dt_bias,
                      const DeltaRuleShape& shape, const int32_t* seqs, int batch, void* states,
                      DType state_dtype, float* y, cudaStream_t stream);

}  // namespace strata::cuda
