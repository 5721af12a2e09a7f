#pragma once
// Device helpers shared by the recurrent-layer kernels (mamba.cu, delta_rule.cu): the pass's
// request table (ops/state_seqs.h), state loads and stores in f32 or bf16, softplus as the CPU
// reference computes it.
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/state_seqs.h"

namespace strata::cuda {

using bf16 = __nv_bfloat16;

// As cpu::softplus: the identity above 20, where log1p(exp(x)) == x in f32.
__device__ __forceinline__ float softplus(float x) {
  return x > 20.0f ? x : log1pf(expf(x));
}

__device__ __forceinline__ float load_state(const float* s, int64_t i) {
  return s[i];
}
__device__ __forceinline__ float load_state(const bf16* s, int64_t i) {
  return __bfloat162float(s[i]);
}
__device__ __forceinline__ void store_state(float* s, int64_t i, float v) {
  s[i] = v;
}
__device__ __forceinline__ void store_state(bf16* s, int64_t i, float v) {
  s[i] = __float2bfloat16_rn(v);
}

struct Seq {
  int begin, len, slot, resumes;
};

__device__ __forceinline__ Seq seq_at(const int32_t* seqs, int b) {
  const int32_t* s = seqs + static_cast<int64_t>(b) * kStateSeqInts;
  return {s[0], s[1], s[2], s[3]};
}

}  // namespace strata::cuda
