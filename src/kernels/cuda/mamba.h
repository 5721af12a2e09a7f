#pragma once
// The CUDA kernels of the Mamba2 mixer behind CudaOps (ops/cuda/cuda_ops.h); kernels/cpu/mamba.h
// is the reference they are tested against (ops_device_test). Every request of a pass is served
// by one launch: `seqs` [batch, kStateSeqInts] int32 on the device (ops/state_seqs.h) says
// where each request's tokens and state slot are, so a captured decode graph replays them with
// new requests. Arithmetic is f32; the SSM state is stored f32 or bf16.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace strata::cuda {

// out [T, C] f32 (contiguous) = bias + causal depthwise conv over x [T, C] f32 (row stride
// x_stride) with weight [C, K], then SiLU when `silu`; conv_states [slots, C * (K - 1)] f32
// updated.
void causal_conv1d(const float* x, int64_t x_stride, int64_t tokens, int channels,
                   const float* weight, const float* bias, int kernel, bool silu,
                   const int32_t* seqs, int batch, float* conv_states, float* out,
                   cudaStream_t stream);

struct SsmShape {
  int num_heads = 0, head_dim = 0, n_groups = 1, state_size = 0, chunk_size = 256;
  float dt_min = 0.0f, dt_max = 0.0f;
};

// y [T, heads*head_dim] f32 (contiguous) = scan(xbc [T, *] (x | B | C, row stride xbc_stride),
// dt_raw [T, heads] (row stride dt_stride)) + D x, from and into states [slots, H*P*N]
// (`state_dtype` f32 or bf16). decode: the recurrence token by token (one block per request
// and head, one warp per head_dim row); otherwise the SSD chunked form.
void ssm_scan(const float* xbc, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride,
              const float* A, const float* D, const float* dt_bias, const SsmShape& shape,
              const int32_t* seqs, int batch, bool decode, void* states, DType state_dtype,
              float* y, cudaStream_t stream);

// out [rows, width] (f32 or bf16, row stride out_stride) = the gated grouped RMS norm of
// y [rows, width] f32 by z (row stride z_stride); weight f32 [width] or null (gate only).
// `sums` (row stride sums_stride), when not null: each group's sum of squares over every
// tensor-parallel rank, a whole group `group_width` wide (y holds this rank's part).
void gated_rms_norm(const float* y, const float* z, int64_t z_stride, int64_t rows, int width,
                    int groups, const float* weight, float eps, bool norm_before_gate,
                    const float* sums, int64_t sums_stride, int64_t group_width, void* out,
                    DType out_dtype, int64_t out_stride, cudaStream_t stream);
// sums[r * sums_stride + g] = the sum of squares of group g of row r of what gated_rms_norm
// normalizes.
void gated_sum_squares(const float* y, const float* z, int64_t z_stride, int64_t rows, int width,
                       int groups, bool norm_before_gate, float* sums, int64_t sums_stride,
                       cudaStream_t stream);

// x[r, c] *= scale[c] (x f32, row stride).
void scale_columns(float* x, int64_t stride, int64_t rows, int64_t cols, const float* scale,
                   cudaStream_t stream);

}  // namespace strata::cuda
