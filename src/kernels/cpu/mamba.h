#pragma once
// CPU kernels of the Mamba2 mixer (the reference every other backend is tested against):
// the causal depthwise conv with its rolling state, the selective-state-space scan (an exact
// token-by-token recurrence, used for decode, and the SSD chunked form, used for prefill), and
// the gated grouped RMSNorm of the scan output.
#include <cstdint>

namespace strata::cpu {

// Causal depthwise conv1d (+ bias, + SiLU) over `len` new rows of x [len, channels] (row stride
// x_stride). `state` [channels, kernel-1] holds the inputs before the first new row, oldest
// first; it is updated to the last kernel-1 inputs. weight [channels, kernel]. out [len, channels].
void causal_conv1d(const float* x, int64_t x_stride, int len, int channels, const float* weight,
                   const float* bias, int kernel, float* state, float* out, bool silu);

// One request's slice of the scan. Head h reads x[t, h*head_dim ...], group g = h / (heads /
// groups) of B and C, and dt[t, h], which is already softplus(dt + dt_bias), clamped.
struct SsmScanArgs {
  int num_heads = 0, head_dim = 0, n_groups = 1, state_size = 0;
  int len = 0;
  const float* x = nullptr;  // [len, heads*head_dim] with row stride `stride`
  const float* B = nullptr;  // [len, groups*state_size] with row stride `stride`
  const float* C = nullptr;  // [len, groups*state_size] with row stride `stride`
  int64_t stride = 0;
  const float* dt = nullptr;  // [len, heads]
  const float* A = nullptr;   // [heads], negative: -exp(A_log)
  const float* D = nullptr;   // [heads] skip connection
};

// state [heads, head_dim, state_size] (read and updated); y [len, heads*head_dim].
//   state_t = exp(dt_t A) state_{t-1} + dt_t x_t B_t^T;   y_t = state_t C_t + D x_t
void ssm_scan_sequential(const SsmScanArgs& a, float* state, float* y);

// The same result by chunks of `chunk_size` tokens (SSD, Mamba2 paper §6): inside a chunk the
// output is a masked, decay-weighted (C B^T) product over the chunk's inputs plus the decayed
// contribution of the state the chunk starts from; the state is passed on chunk to chunk.
void ssm_scan_chunked(const SsmScanArgs& a, int chunk_size, float* state, float* y);

// Output gate and norm of the scan, per row of y [rows, width] with z [rows, width] (row stride
// z_stride): norm_before_gate ? norm(y) * silu(z) : norm(y * silu(z)). The RMS norm runs over
// `groups` equal groups of columns and multiplies by weight; weight == nullptr: gate only.
// `sums` (row stride sums_stride), when not null: each group's sum of squares over every
// tensor-parallel rank, a whole group being `group_width` wide (this rank's y is a part).
void gated_rms_norm(float* y, const float* z, int64_t z_stride, int64_t rows, int width, int groups,
                    const float* weight, float eps, bool norm_before_gate, const float* sums,
                    int64_t sums_stride, int64_t group_width);
// sums[r * sums_stride + g] = the sum of squares of group g of row r of what gated_rms_norm
// normalizes (y, or y * silu(z) unless norm_before_gate).
void gated_sum_squares(const float* y, const float* z, int64_t z_stride, int64_t rows, int width,
                       int groups, bool norm_before_gate, float* sums, int64_t sums_stride);

}  // namespace strata::cpu
