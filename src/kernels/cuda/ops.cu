#include <cfloat>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace strata::cuda {

namespace {

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}

__global__ void embedding_kernel(const bf16* table, const int32_t* ids, int width, float* out) {
  const int64_t t = blockIdx.x;
  const bf16* row = table + static_cast<int64_t>(ids[t]) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    out[t * width + i] = __bfloat162float(row[i]);
}

template <typename OutT>
__global__ void rms_norm_kernel(const float* x, const int32_t* rows, const float* w, int width,
                                float eps, float offset, OutT* out) {
  const int64_t r = blockIdx.x;
  const float* row = x + (rows ? static_cast<int64_t>(rows[r]) : r) * width;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) ss += row[i] * row[i];
  const float inv = rsqrtf(block_sum(ss) / width + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    out[r * width + i] = from_f32<OutT>(row[i] * inv * (w[i] + offset));
}

// One warp per (token, head); blockDim = 32 x heads per block.
__global__ void qk_norm_rope_kernel(float* qkv, const int32_t* positions, RopeParams p) {
  const int t = blockIdx.x;
  const int head = blockIdx.y * blockDim.y + threadIdx.y;
  const int lane = threadIdx.x;
  if (head >= p.num_q_heads + p.num_k_heads) return;
  const bool is_q = head < p.num_q_heads;
  float* x = qkv + t * p.row_stride +
             (is_q ? head * p.head_dim : p.k_offset + (head - p.num_q_heads) * p.head_dim);
  const float* norm = is_q ? p.q_norm : p.k_norm;
  if (norm) {
    float ss = 0.0f;
    for (int i = lane; i < p.head_dim; i += 32) ss += x[i] * x[i];
    const float inv = rsqrtf(warp_sum(ss) / p.head_dim + p.norm_eps);
    for (int i = lane; i < p.head_dim; i += 32) x[i] = x[i] * inv * norm[i];
    __syncwarp();
  }
  if (!p.inv_freq) return;
  const int half = p.rotary_dim / 2;
  const float pos = static_cast<float>(positions[t]);
  for (int i = lane; i < half; i += 32) {
    const float angle = pos * p.inv_freq[i];
    const float c = cosf(angle) * p.cos_sin_scale, s = sinf(angle) * p.cos_sin_scale;
    float* a = p.interleaved ? &x[2 * i] : &x[i];
    float* b = p.interleaved ? &x[2 * i + 1] : &x[i + half];
    const float x1 = *a, x2 = *b;
    *a = x1 * c - x2 * s;
    *b = x2 * c + x1 * s;
  }
}

__global__ void gated_act_kernel(const float* gate_up, int64_t total, int width, bool gelu,
                                 bf16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    const float g = gate_up[r * 2 * width + c], u = gate_up[r * 2 * width + width + c];
    float a;
    if (gelu) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      a = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    } else {
      a = g / (1.0f + expf(-g));
    }
    out[i] = __float2bfloat16_rn(a * u);
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t total, int width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[i % width];
}

__global__ void to_bf16_kernel(const float* src, int64_t src_stride, int width, bf16* out) {
  const int64_t r = blockIdx.x;
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    out[r * width + i] = __float2bfloat16_rn(src[r * src_stride + i]);
}

__global__ void store_kv_kernel(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                                const int32_t* slots, int k_width, int v_width, bf16* k_cache,
                                int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  for (int i = threadIdx.x; i < k_width; i += blockDim.x)
    k_cache[slot * k_cache_stride + i] = __float2bfloat16_rn(k[t * k_stride + i]);
  if (v)
    for (int i = threadIdx.x; i < v_width; i += blockDim.x)
      v_cache[slot * v_cache_stride + i] = __float2bfloat16_rn(v[t * v_stride + i]);
}

__global__ void scatter_req_to_token_kernel(const int32_t* req_pool_indices,
                                            const int32_t* prefix_lens,
                                            const int32_t* token_offsets,
                                            const int32_t* out_cache_loc, int32_t* req_to_token,
                                            int stride) {
  const int b = blockIdx.x;
  const int n = token_offsets[b + 1] - token_offsets[b];
  int32_t* row = req_to_token + static_cast<int64_t>(req_pool_indices[b]) * stride + prefix_lens[b];
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < n; i += gridDim.y * blockDim.x)
    row[i] = out_cache_loc[token_offsets[b] + i];
}

__global__ void argmax_kernel(const float* logits, int vocab, int32_t* ids) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float best = -FLT_MAX;
  int best_i = vocab;  // an index past the end loses every tie
  for (int i = threadIdx.x; i < vocab; i += blockDim.x)
    if (row[i] > best) best = row[i], best_i = i;  // strided scan: the first max of this thread
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, best, off);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, off);
    if (o > best || (o == best && oi < best_i)) best = o, best_i = oi;
  }
  __shared__ float bv[32];
  __shared__ int bi[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) bv[warp] = best, bi[warp] = best_i;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    best = lane < warps ? bv[lane] : -FLT_MAX;
    best_i = lane < warps ? bi[lane] : vocab;
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xffffffffu, best, off);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, off);
      if (o > best || (o == best && oi < best_i)) best = o, best_i = oi;
    }
    if (lane == 0) ids[blockIdx.x] = best_i < vocab ? best_i : 0;
  }
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_random_kernel(bf16* out, int64_t n, uint64_t seed, float half_width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(splitmix64(seed ^ (i * 0xd1b54a32d192ed03ull)) >> 40) *
                    (1.0f / 16777216.0f);
    out[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * half_width);
  }
}

int grid_for(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

int threads_for_row(int width) {
  return width >= 1024 ? 1024 : ((width + 31) / 32) * 32;
}

}  // namespace

void embedding(const bf16* table, const int32_t* ids, int num_tokens, int width, float* out,
               cudaStream_t stream) {
  if (num_tokens == 0) return;
  embedding_kernel<<<num_tokens, threads_for_row(width), 0, stream>>>(table, ids, width, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

template <typename OutT>
static void rms_norm_impl(const float* x, const int32_t* rows, const float* w, int num_rows,
                          int width, float eps, float offset, OutT* out, cudaStream_t stream) {
  if (num_rows == 0) return;
  rms_norm_kernel<OutT>
      <<<num_rows, threads_for_row(width), 0, stream>>>(x, rows, w, width, eps, offset, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

void rms_norm(const float* x, const int32_t* rows, const float* w, int num_rows, int width,
              float eps, float offset, bf16* out, cudaStream_t stream) {
  rms_norm_impl(x, rows, w, num_rows, width, eps, offset, out, stream);
}
void rms_norm(const float* x, const int32_t* rows, const float* w, int num_rows, int width,
              float eps, float offset, float* out, cudaStream_t stream) {
  rms_norm_impl(x, rows, w, num_rows, width, eps, offset, out, stream);
}

void qk_norm_rope(float* qkv, const int32_t* positions, int num_tokens, const RopeParams& p,
                  cudaStream_t stream) {
  if (num_tokens == 0 || (!p.inv_freq && !p.q_norm && !p.k_norm)) return;
  constexpr int kHeadsPerBlock = 4;
  const dim3 block(32, kHeadsPerBlock);
  const dim3 grid(num_tokens,
                  (p.num_q_heads + p.num_k_heads + kHeadsPerBlock - 1) / kHeadsPerBlock);
  qk_norm_rope_kernel<<<grid, block, 0, stream>>>(qkv, positions, p);
  STRATA_CUDA_CHECK_LAUNCH();
}

void gated_act(const float* gate_up, int rows, int width, bool gelu, bf16* out,
               cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * width;
  if (total == 0) return;
  gated_act_kernel<<<grid_for(total, 256), 256, 0, stream>>>(gate_up, total, width, gelu, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

void add_bias(float* y, const float* bias, int rows, int width, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * width;
  if (total == 0) return;
  add_bias_kernel<<<grid_for(total, 256), 256, 0, stream>>>(y, bias, total, width);
  STRATA_CUDA_CHECK_LAUNCH();
}

void to_bf16(const float* src, int rows, int64_t src_stride, int width, bf16* out,
             cudaStream_t stream) {
  if (rows == 0) return;
  to_bf16_kernel<<<rows, threads_for_row(width), 0, stream>>>(src, src_stride, width, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

void store_kv(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              const int32_t* slots, int num_tokens, int k_width, int v_width, bf16* k_cache,
              int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride, cudaStream_t stream) {
  if (num_tokens == 0) return;
  store_kv_kernel<<<num_tokens, threads_for_row(k_width), 0, stream>>>(
      k, k_stride, v, v_stride, slots, k_width, v_width, k_cache, k_cache_stride, v_cache,
      v_cache_stride);
  STRATA_CUDA_CHECK_LAUNCH();
}

void scatter_req_to_token(const int32_t* req_pool_indices, const int32_t* prefix_lens,
                          const int32_t* token_offsets, const int32_t* out_cache_loc, int batch,
                          int max_extend, int32_t* req_to_token, int stride, cudaStream_t stream) {
  if (batch == 0) return;
  const int chunks = (max_extend + 255) / 256;
  const dim3 grid(batch, chunks < 1 ? 1 : (chunks > 64 ? 64 : chunks));
  scatter_req_to_token_kernel<<<grid, 256, 0, stream>>>(
      req_pool_indices, prefix_lens, token_offsets, out_cache_loc, req_to_token, stride);
  STRATA_CUDA_CHECK_LAUNCH();
}

void argmax_rows(const float* logits, int rows, int vocab, int32_t* ids, cudaStream_t stream) {
  if (rows == 0) return;
  argmax_kernel<<<rows, 1024, 0, stream>>>(logits, vocab, ids);
  STRATA_CUDA_CHECK_LAUNCH();
}

__global__ void trap_kernel() {
  __trap();
}

void trap(cudaStream_t stream) {
  trap_kernel<<<1, 1, 0, stream>>>();
  STRATA_CUDA_CHECK_LAUNCH();
}

void fill_random(bf16* out, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n == 0) return;
  fill_random_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, n, seed, stddev * 1.7320508f);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
