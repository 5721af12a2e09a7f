#pragma once
// Warp- and block-wide reductions shared by the kernels (a block's size is a multiple of 32,
// at most 1024). The argmax order is (larger value, then lower index): torch.topk's and the
// CPU reference's, so every device picks the same token on ties.
#include <cfloat>
#include <climits>

namespace strata::cuda {

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Whether (v, i) comes before (best, best_i) in the argmax order; index INT_MAX is "none".
__device__ __forceinline__ bool argmax_before(float v, int i, float best, int best_i) {
  return best_i == INT_MAX || v > best || (v == best && i < best_i);
}

__device__ __forceinline__ void warp_argmax(float& best, int& best_i) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, best, off);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, off);
    if (oi != INT_MAX && argmax_before(o, oi, best, best_i)) best = o, best_i = oi;
  }
}

// Sum over the block; every thread gets the total.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
  return warp_sum(v);
}

// Maximum over the block; every thread gets it.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : -FLT_MAX;
  return warp_max(v);
}

// The first (value, index) of the block in the argmax order; every thread gets it (index
// INT_MAX when no thread had a candidate).
__device__ __forceinline__ void block_argmax(float& best, int& best_i) {
  __shared__ float pv[32];
  __shared__ int pi[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  warp_argmax(best, best_i);
  __syncthreads();
  if (lane == 0) pv[warp] = best, pi[warp] = best_i;
  __syncthreads();
  const bool have = lane < static_cast<int>(blockDim.x / 32);
  best = have ? pv[lane] : -FLT_MAX;
  best_i = have ? pi[lane] : INT_MAX;
  warp_argmax(best, best_i);
}

}  // namespace strata::cuda
