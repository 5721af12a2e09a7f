#include <algorithm>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace strata::cuda {

namespace {

// One thread per element of a row, up to a full block.
int threads_for_row(int width) {
  return width >= 1024 ? 1024 : ((width + 31) / 32) * 32;
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

// Block (token, chunk); a thread per work item of its token: a q pair, a k pair, a k column
// past the rotary ones, a v column. Every load of an item is independent of the others (slot,
// position, frequency, the pair), so one round trip to memory covers them.
__global__ void rope_store_kv_kernel(float* q, int64_t q_stride, int num_q_heads, const float* k,
                                     int64_t k_stride, const float* v, int64_t v_stride,
                                     const int32_t* slots, int num_kv_heads, int head_dim,
                                     int v_width, RopeArgs rope, bf16* k_cache,
                                     int64_t k_cache_stride, bf16* v_cache,
                                     int64_t v_cache_stride) {
  const int64_t t = blockIdx.x;
  const int half = rope.rotary_dim / 2, pass = head_dim - rope.rotary_dim;
  const int q_pairs = num_q_heads * half, k_pairs = num_kv_heads * half;
  const int k_rest = num_kv_heads * pass, items = q_pairs + k_pairs + k_rest + (v ? v_width : 0);
  // The pair (f, its partner) of a head's row, as rope_kernel lays them out.
  const auto pair_at = [&](int f, int& a, int& b) {
    a = rope.interleaved ? 2 * f : f;
    b = rope.interleaved ? 2 * f + 1 : f + half;
  };
  // cos and sin as rope_kernel computes them (its table), so the rotation is the same bits.
  const auto rotate = [&](float x1, float x2, int f, float& y1, float& y2) {
    const float angle = static_cast<float>(rope.positions[t]) * rope.inv_freq[f];
    const float c = cosf(angle) * rope.cos_sin_scale, s = sinf(angle) * rope.cos_sin_scale;
    y1 = x1 * c - x2 * s;
    y2 = x2 * c + x1 * s;
  };
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < items; i += gridDim.y * blockDim.x) {
    if (i < q_pairs) {
      int a, b;
      pair_at(i % half, a, b);
      float* row = q + t * q_stride + static_cast<int64_t>(i / half) * head_dim;
      rotate(row[a], row[b], i % half, row[a], row[b]);
      continue;
    }
    const int64_t slot = slots[t];
    int j = i - q_pairs;
    if (j < k_pairs) {
      int a, b;
      pair_at(j % half, a, b);
      const int64_t head = static_cast<int64_t>(j / half) * head_dim;
      float y1, y2;
      rotate(k[t * k_stride + head + a], k[t * k_stride + head + b], j % half, y1, y2);
      k_cache[slot * k_cache_stride + head + a] = __float2bfloat16_rn(y1);
      k_cache[slot * k_cache_stride + head + b] = __float2bfloat16_rn(y2);
      continue;
    }
    j -= k_pairs;
    if (j < k_rest) {
      const int64_t at = static_cast<int64_t>(j / pass) * head_dim + rope.rotary_dim + j % pass;
      k_cache[slot * k_cache_stride + at] = __float2bfloat16_rn(k[t * k_stride + at]);
      continue;
    }
    j -= k_rest;
    v_cache[slot * v_cache_stride + j] = __float2bfloat16_rn(v[t * v_stride + j]);
  }
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

}  // namespace

void store_kv(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              const int32_t* slots, int num_tokens, int k_width, int v_width, bf16* k_cache,
              int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride, cudaStream_t stream) {
  if (num_tokens == 0) return;
  store_kv_kernel<<<num_tokens, threads_for_row(k_width), 0, stream>>>(
      k, k_stride, v, v_stride, slots, k_width, v_width, k_cache, k_cache_stride, v_cache,
      v_cache_stride);
  STRATA_CUDA_CHECK_LAUNCH();
}

void rope_store_kv(float* q, int64_t q_stride, int num_q_heads, const float* k, int64_t k_stride,
                   const float* v, int64_t v_stride, const int32_t* slots, int num_tokens,
                   int num_kv_heads, int head_dim, int v_width, const RopeArgs& rope, bf16* k_cache,
                   int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride,
                   cudaStream_t stream) {
  if (num_tokens == 0) return;
  const int64_t items = int64_t{num_q_heads + num_kv_heads} * (rope.rotary_dim / 2) +
                        int64_t{num_kv_heads} * (head_dim - rope.rotary_dim) + (v ? v_width : 0);
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>(num_tokens),
                  static_cast<unsigned>(std::min<int64_t>((items + kThreads - 1) / kThreads, 64)));
  rope_store_kv_kernel<<<grid, kThreads, 0, stream>>>(
      q, q_stride, num_q_heads, k, k_stride, v, v_stride, slots, num_kv_heads, head_dim, v_width,
      rope, k_cache, k_cache_stride, v_cache, v_cache_stride);
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

__global__ void trap_kernel() {
  __trap();
}

void trap(cudaStream_t stream) {
  trap_kernel<<<1, 1, 0, stream>>>();
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
