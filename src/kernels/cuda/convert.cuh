#pragma once
// Device-side conversion of f32 results to a kernel's output element type (f32 or bf16,
// round-to-nearest), shared by the attention and elementwise kernels.
#include <cuda_bf16.h>

namespace strata::cuda {

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

}  // namespace strata::cuda
