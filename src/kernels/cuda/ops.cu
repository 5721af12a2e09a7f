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
