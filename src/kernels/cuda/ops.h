#pragma once
// The KV-cache kernels of the CUDA attention backend (writing new keys/values, keeping the
// device request table) and a fault for the failure tests. Every pointer is device memory;
// every launch goes on `stream` and is checked. The ops every model calls are in
// kernels/cuda/tensor_ops.h and moe.h, behind CudaOps (ops/cuda/cuda_ops.h).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

using bf16 = __nv_bfloat16;

// Writes the new tokens' keys and values into the cache rows `slots` (bf16). k and v are
// [T, *] with row strides; v may be null when the layout keeps values inside keys.
void store_kv(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              const int32_t* slots, int num_tokens, int k_width, int v_width, bf16* k_cache,
              int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride, cudaStream_t stream);

// Rotary embedding of q and k, then store_kv, in one kernel (the attention backend's path for
// calls that bring their rope, attention/backend.h). q's `num_q_heads` heads are rotated in
// place (f32); k's `num_kv_heads` heads are rotated on their way into the cache and k itself is
// left as it was; v is copied. Heads are `head_dim` apart in q, k and a cache row; the first
// `rotary_dim` columns of a head rotate (halves, or pairs (2i, 2i+1) when interleaved), the
// rest pass through. The rotation is rope_2d's (tensor_ops.h), to the bit.
struct RopeArgs {
  const int32_t* positions = nullptr;  // [T]
  const float* inv_freq = nullptr;     // [rotary_dim / 2]
  int rotary_dim = 0;
  bool interleaved = false;
  float cos_sin_scale = 1.0f;
};
void rope_store_kv(float* q, int64_t q_stride, int num_q_heads, const float* k, int64_t k_stride,
                   const float* v, int64_t v_stride, const int32_t* slots, int num_tokens,
                   int num_kv_heads, int head_dim, int v_width, const RopeArgs& rope, bf16* k_cache,
                   int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride,
                   cudaStream_t stream);

// req_to_token[req_pool_indices[b] * stride + prefix_lens[b] + i] = out_cache_loc[offsets[b] + i]
// for every new token: the device mirror of ReqToTokenPool follows the batch's new tokens.
void scatter_req_to_token(const int32_t* req_pool_indices, const int32_t* prefix_lens,
                          const int32_t* token_offsets, const int32_t* out_cache_loc, int batch,
                          int max_extend, int32_t* req_to_token, int stride, cudaStream_t stream);

// A kernel that fails (illegal instruction), for fault-injection tests: the device context is
// unusable afterwards, as after a real kernel fault.
void trap(cudaStream_t stream);

}  // namespace strata::cuda
