#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/mamba.h"
#include "kernels/cuda/recurrent_common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "ops/state_seqs.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;
// Output rows of a chunk computed together in the SSD kernel (their C rows and their slice of
// the decay-masked C B^T matrix sit in shared memory).
constexpr int kTileRows = 16;
// The one-step kernel keeps a state row in registers across a request's tokens: state_size /
// 32 values per lane.
constexpr int kMaxStatePerLane = 8;

__device__ __forceinline__ float silu(float x) {
  return x / (1.0f + expf(-x));
}

// The request whose new tokens include row t: the last one starting at or before it (requests
// are laid out in order; one with no tokens starts where the next does).
__device__ int request_of(const int32_t* seqs, int batch, int t) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (seqs[static_cast<int64_t>(mid) * kStateSeqInts] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float dt_of(const float* dt_raw, int64_t dt_stride, int64_t row, int h,
                                       float bias, const SsmShape& sh) {
  return fminf(fmaxf(softplus(dt_raw[row * dt_stride + h] + bias), sh.dt_min), sh.dt_max);
}

// One thread per (token, channel): the conv reads the slot's previous inputs for positions
// before the request's first new token (zeros for a request that starts fresh).
__global__ void conv_out_kernel(const float* x, int64_t x_stride, int64_t tokens, int channels,
                                const float* weight, const float* bias, int kernel, bool apply_silu,
                                const int32_t* seqs, int batch, const float* states, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int width = kernel - 1;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const Seq q = seq_at(seqs, request_of(seqs, batch, static_cast<int>(t)));
    const int j = static_cast<int>(t) - q.begin;
    const float* st = states + (static_cast<int64_t>(q.slot) * channels + c) * width;
    float acc = bias ? bias[c] : 0.0f;
    for (int k = 0; k < kernel; ++k) {
      const int rel = j - width + k;
      const float v =
          rel >= 0 ? x[(q.begin + rel) * x_stride + c] : (q.resumes ? st[width + rel] : 0.0f);
      acc += weight[static_cast<int64_t>(c) * kernel + k] * v;
    }
    out[t * channels + c] = apply_silu ? silu(acc) : acc;
  }
}

// After conv_out_kernel: each slot keeps the last kernel-1 inputs of (state | new tokens).
// Entry j reads entry len + j > j of the old state, so ascending j updates it in place.
__global__ void conv_state_kernel(const float* x, int64_t x_stride, int channels, int kernel,
                                  const int32_t* seqs, float* states) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const Seq q = seq_at(seqs, blockIdx.y);
  if (q.len == 0) return;
  const int width = kernel - 1;
  float* st = states + (static_cast<int64_t>(q.slot) * channels + c) * width;
  for (int j = 0; j < width; ++j) {
    const int rel = q.len - width + j;
    st[j] = rel >= 0 ? x[(q.begin + rel) * x_stride + c] : (q.resumes ? st[width + rel] : 0.0f);
  }
}

// The recurrence token by token: block (head, request), one warp per head_dim row at a time,
// the row's state_size values in registers across the request's tokens.
template <typename S>
__global__ void ssm_step_kernel(const float* xbc, int64_t xbc_stride, const float* dt_raw,
                                int64_t dt_stride, const float* A, const float* D,
                                const float* dt_bias, SsmShape sh, const int32_t* seqs, S* states,
                                float* y) {
  const int h = blockIdx.x;
  const Seq q = seq_at(seqs, blockIdx.y);
  if (q.len == 0) return;
  const int P = sh.head_dim, N = sh.state_size, H = sh.num_heads;
  const int g = h / (H / sh.n_groups);
  const int64_t inner = static_cast<int64_t>(H) * P;
  S* st = states + static_cast<int64_t>(q.slot) * inner * N + static_cast<int64_t>(h) * P * N;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const float a = A[h], d = D[h], bias = dt_bias[h];
  for (int p = warp; p < P; p += warps) {
    float s[kMaxStatePerLane];
#pragma unroll
    for (int k = 0; k < kMaxStatePerLane; ++k) {
      const int n = lane + 32 * k;
      s[k] = n < N && q.resumes ? load_state(st, static_cast<int64_t>(p) * N + n) : 0.0f;
    }
    for (int i = 0; i < q.len; ++i) {
      const int64_t row = q.begin + i;
      const float dt = dt_of(dt_raw, dt_stride, row, h, bias, sh);
      const float decay = expf(dt * a);
      const float* xr = xbc + row * xbc_stride;
      const float xp = xr[static_cast<int64_t>(h) * P + p];
      const float* B = xr + inner + static_cast<int64_t>(g) * N;
      const float* C = B + static_cast<int64_t>(sh.n_groups) * N;
      const float dx = dt * xp;
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < kMaxStatePerLane; ++k) {
        const int n = lane + 32 * k;
        if (n < N) {
          s[k] = decay * s[k] + dx * B[n];
          acc += s[k] * C[n];
        }
      }
      acc = warp_sum(acc);
      if (lane == 0) y[row * inner + static_cast<int64_t>(h) * P + p] = acc + d * xp;
    }
#pragma unroll
    for (int k = 0; k < kMaxStatePerLane; ++k) {
      const int n = lane + 32 * k;
      if (n < N) store_state(st, static_cast<int64_t>(p) * N + n, s[k]);
    }
  }
}

// The SSD chunked scan (Mamba2 paper §6), as cpu::ssm_scan_chunked computes it: block (head,
// request) walks the request's chunks with the head's state [head_dim, state_size] in shared
// memory. Per chunk: cum = running sum of dt A; y_i = sum_{j<=i} (C_i.B_j) e^(cum_i - cum_j)
// dt_j x_j + e^(cum_i) C_i S + D x_i by tiles of kTileRows rows; then S = e^(cum_last) S +
// sum_j e^(cum_last - cum_j) dt_j x_j B_j^T.
template <typename S>
__global__ void ssd_chunked_kernel(const float* xbc, int64_t xbc_stride, const float* dt_raw,
                                   int64_t dt_stride, const float* A, const float* D,
                                   const float* dt_bias, SsmShape sh, const int32_t* seqs,
                                   S* states, float* y) {
  extern __shared__ float smem[];
  const int h = blockIdx.x;
  const Seq q = seq_at(seqs, blockIdx.y);
  if (q.len == 0) return;
  const int P = sh.head_dim, N = sh.state_size, H = sh.num_heads, L0 = sh.chunk_size;
  const int g = h / (H / sh.n_groups);
  const int64_t inner = static_cast<int64_t>(H) * P;
  const int tid = threadIdx.x, bs = blockDim.x;
  float* St = smem;                // [P][N + 1]: the state (padded: no bank conflicts)
  float* cum = St + P * (N + 1);   // [L0]
  float* dtv = cum + L0;           // [L0] dt, then the state update's weights
  float* G = dtv + L0;             // [kTileRows][L0] masked, decayed C B^T (times dt)
  float* Ct = G + kTileRows * L0;  // [kTileRows][N] the tile's C rows
  S* st = states + static_cast<int64_t>(q.slot) * inner * N + static_cast<int64_t>(h) * P * N;
  const float a = A[h], d = D[h], bias = dt_bias[h];
  auto x_at = [&](int t) { return xbc + (q.begin + t) * xbc_stride + static_cast<int64_t>(h) * P; };
  auto B_at = [&](int t) {
    return xbc + (q.begin + t) * xbc_stride + inner + static_cast<int64_t>(g) * N;
  };
  auto C_at = [&](int t) { return B_at(t) + static_cast<int64_t>(sh.n_groups) * N; };

  for (int e = tid; e < P * N; e += bs)
    St[(e / N) * (N + 1) + e % N] = q.resumes ? load_state(st, e) : 0.0f;
  for (int c0 = 0; c0 < q.len; c0 += L0) {
    const int L = min(L0, q.len - c0);
    __syncthreads();
    for (int i = tid; i < L; i += bs)
      dtv[i] = dt_of(dt_raw, dt_stride, q.begin + c0 + i, h, bias, sh);
    __syncthreads();
    if (tid == 0) {
      float run = 0.0f;
      for (int i = 0; i < L; ++i) cum[i] = run += dtv[i] * a;
    }
    __syncthreads();
    for (int i0 = 0; i0 < L; i0 += kTileRows) {
      const int rows = min(kTileRows, L - i0), J = i0 + rows;
      for (int e = tid; e < rows * N; e += bs) Ct[e] = C_at(c0 + i0 + e / N)[e % N];
      __syncthreads();
      for (int e = tid; e < rows * J; e += bs) {
        const int ii = e / J, j = e % J, i = i0 + ii;
        float v = 0.0f;
        if (j <= i) {
          const float* Bj = B_at(c0 + j);
          float cb = 0.0f;
          for (int n = 0; n < N; ++n) cb += Ct[ii * N + n] * Bj[n];
          v = cb * expf(cum[i] - cum[j]) * dtv[j];
        }
        G[ii * L0 + j] = v;
      }
      __syncthreads();
      for (int e = tid; e < rows * P; e += bs) {
        const int ii = e / P, p = e % P, i = i0 + ii;
        float from_state = 0.0f;
        for (int n = 0; n < N; ++n) from_state += Ct[ii * N + n] * St[p * (N + 1) + n];
        float within = 0.0f;
        for (int j = 0; j <= i; ++j) within += G[ii * L0 + j] * x_at(c0 + j)[p];
        y[(q.begin + c0 + i) * inner + static_cast<int64_t>(h) * P + p] =
            within + expf(cum[i]) * from_state + d * x_at(c0 + i)[p];
      }
      __syncthreads();
    }
    const float total = cum[L - 1];
    for (int j = tid; j < L; j += bs) dtv[j] = expf(total - cum[j]) * dtv[j];
    __syncthreads();
    const float chunk_decay = expf(total);
    for (int e = tid; e < P * N; e += bs) {
      const int p = e / N, n = e % N;
      float s = St[p * (N + 1) + n] * chunk_decay;
      for (int j = 0; j < L; ++j) s += dtv[j] * x_at(c0 + j)[p] * B_at(c0 + j)[n];
      St[p * (N + 1) + n] = s;
    }
  }
  __syncthreads();
  for (int e = tid; e < P * N; e += bs) store_state(st, e, St[(e / N) * (N + 1) + e % N]);
}

__global__ void gated_norm_kernel(const float* y, const float* z, int64_t z_stride, int width,
                                  int groups, const float* w, float eps, bool norm_before_gate,
                                  const float* sums, int64_t sums_stride, int64_t group_width,
                                  void* out, DType out_dtype, int64_t out_stride) {
  const int64_t r = blockIdx.x;
  const float* yr = y + r * width;
  const float* zr = z + r * z_stride;
  const bool gate_first = !norm_before_gate || !w;
  auto value = [&](int c) { return gate_first ? yr[c] * silu(zr[c]) : yr[c]; };
  const int group_size = width / groups;
  for (int g = 0; g < groups; ++g) {
    const int base = g * group_size;
    float inv = 1.0f;
    if (w && sums) {
      inv = 1.0f / sqrtf(sums[r * sums_stride + g] / static_cast<float>(group_width) + eps);
    } else if (w) {
      float ss = 0.0f;
      for (int i = threadIdx.x; i < group_size; i += blockDim.x) {
        const float v = value(base + i);
        ss += v * v;
      }
      ss = block_sum(ss);
      inv = 1.0f / sqrtf(ss / group_size + eps);
    }
    for (int i = threadIdx.x; i < group_size; i += blockDim.x) {
      const int c = base + i;
      float v = value(c);
      if (w) v = v * inv * w[c];
      if (w && norm_before_gate) v *= silu(zr[c]);
      if (out_dtype == DType::BF16)
        static_cast<bf16*>(out)[r * out_stride + c] = __float2bfloat16_rn(v);
      else
        static_cast<float*>(out)[r * out_stride + c] = v;
    }
  }
}

// One block per row, the groups in turn.
__global__ void gated_sum_squares_kernel(const float* y, const float* z, int64_t z_stride,
                                         int width, int groups, bool norm_before_gate, float* sums,
                                         int64_t sums_stride) {
  const int64_t r = blockIdx.x;
  const int group_size = width / groups;
  for (int g = 0; g < groups; ++g) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < group_size; i += blockDim.x) {
      const int c = g * group_size + i;
      const float v =
          norm_before_gate ? y[r * width + c] : y[r * width + c] * silu(z[r * z_stride + c]);
      ss += v * v;
    }
    ss = block_sum(ss);
    if (threadIdx.x == 0) sums[r * sums_stride + g] = ss;
  }
}

__global__ void scale_columns_kernel(float* x, int64_t stride, int64_t total, int64_t cols,
                                     const float* scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[(i / cols) * stride + i % cols] *= scale[i % cols];
}

int blocks_for(int64_t n, int threads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
}

template <typename S>
void launch_scan(const float* xbc, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride,
                 const float* A, const float* D, const float* dt_bias, const SsmShape& sh,
                 const int32_t* seqs, int batch, bool decode, S* states, float* y,
                 cudaStream_t stream) {
  const dim3 grid(sh.num_heads, batch);
  if (decode) {
    ssm_step_kernel<S><<<grid, kThreads, 0, stream>>>(xbc, xbc_stride, dt_raw, dt_stride, A, D,
                                                      dt_bias, sh, seqs, states, y);
    STRATA_CUDA_CHECK_LAUNCH();
    return;
  }
  const size_t smem = sizeof(float) * (static_cast<size_t>(sh.head_dim) * (sh.state_size + 1) +
                                       static_cast<size_t>(sh.chunk_size) * (2 + kTileRows) +
                                       static_cast<size_t>(kTileRows) * sh.state_size);
  int device = 0, max_smem = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  STRATA_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > static_cast<size_t>(max_smem))
    throw_error("Mamba2 chunked scan: head_dim " + std::to_string(sh.head_dim) + ", state_size " +
                std::to_string(sh.state_size) + " and chunk_size " + std::to_string(sh.chunk_size) +
                " need " + std::to_string(smem) +
                " bytes of shared memory per block; this GPU has " + std::to_string(max_smem));
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(
      ssd_chunked_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  ssd_chunked_kernel<S><<<grid, kThreads, smem, stream>>>(xbc, xbc_stride, dt_raw, dt_stride, A, D,
                                                          dt_bias, sh, seqs, states, y);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void causal_conv1d(const float* x, int64_t x_stride, int64_t tokens, int channels,
                   const float* weight, const float* bias, int kernel, bool silu,
                   const int32_t* seqs, int batch, float* conv_states, float* out,
                   cudaStream_t stream) {
  if (tokens == 0 || batch == 0) return;
  const dim3 grid(blocks_for(channels, kThreads),
                  static_cast<unsigned>(std::min<int64_t>(tokens, 65535)));
  conv_out_kernel<<<grid, kThreads, 0, stream>>>(x, x_stride, tokens, channels, weight, bias,
                                                 kernel, silu, seqs, batch, conv_states, out);
  STRATA_CUDA_CHECK_LAUNCH();
  conv_state_kernel<<<dim3(blocks_for(channels, kThreads), batch), kThreads, 0, stream>>>(
      x, x_stride, channels, kernel, seqs, conv_states);
  STRATA_CUDA_CHECK_LAUNCH();
}

void ssm_scan(const float* xbc, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride,
              const float* A, const float* D, const float* dt_bias, const SsmShape& shape,
              const int32_t* seqs, int batch, bool decode, void* states, DType state_dtype,
              float* y, cudaStream_t stream) {
  if (batch == 0) return;
  if (shape.state_size > 32 * kMaxStatePerLane)
    throw_error("Mamba2 on CUDA: state_size " + std::to_string(shape.state_size) +
                " is over the kernels' limit of " + std::to_string(32 * kMaxStatePerLane));
  if (state_dtype == DType::BF16)
    launch_scan(xbc, xbc_stride, dt_raw, dt_stride, A, D, dt_bias, shape, seqs, batch, decode,
                static_cast<bf16*>(states), y, stream);
  else
    launch_scan(xbc, xbc_stride, dt_raw, dt_stride, A, D, dt_bias, shape, seqs, batch, decode,
                static_cast<float*>(states), y, stream);
}

void gated_rms_norm(const float* y, const float* z, int64_t z_stride, int64_t rows, int width,
                    int groups, const float* weight, float eps, bool norm_before_gate,
                    const float* sums, int64_t sums_stride, int64_t group_width, void* out,
                    DType out_dtype, int64_t out_stride, cudaStream_t stream) {
  if (rows == 0) return;
  gated_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      y, z, z_stride, width, groups, weight, eps, norm_before_gate, sums, sums_stride, group_width,
      out, out_dtype, out_stride);
  STRATA_CUDA_CHECK_LAUNCH();
}

void gated_sum_squares(const float* y, const float* z, int64_t z_stride, int64_t rows, int width,
                       int groups, bool norm_before_gate, float* sums, int64_t sums_stride,
                       cudaStream_t stream) {
  if (rows == 0) return;
  gated_sum_squares_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      y, z, z_stride, width, groups, norm_before_gate, sums, sums_stride);
  STRATA_CUDA_CHECK_LAUNCH();
}

void scale_columns(float* x, int64_t stride, int64_t rows, int64_t cols, const float* scale,
                   cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  scale_columns_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(x, stride, total, cols,
                                                                             scale);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
