#pragma once
// Routed experts on the device, grouped by expert without a host round trip (the ops are
// captured into CUDA graphs): sort the (token, slot) pairs by expert, run each projection as
// one launch of 64-row tiles over every expert's rows, and scatter the weighted results back.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/tensor_ops.h"

namespace strata::cuda {

constexpr int kMoeTileRows = 64;

// Tiles a grouped GEMM over `pairs` rows may need: sum_e ceil(n_e / 64) <= pairs / 64 + E.
// Fixed by the shapes alone, so a captured launch has the same grid every replay.
inline int64_t moe_max_tiles(int64_t pairs, int num_experts) {
  return (pairs + kMoeTileRows - 1) / kMoeTileRows + num_experts;
}

// Sorted position s (0 <= s < valid pairs) holds pair perm[s] (= token * top_k + slot) of
// token tokens[s]; tile i covers rows [tile_start[i], min(tile_start[i] + 64, tile_end[i])) of
// expert tile_expert[i] (-1: no tile). A pair whose id is outside [0, E) joins no expert.
struct MoeSort {
  int32_t* perm = nullptr;         // [pairs]
  int32_t* tokens = nullptr;       // [pairs]
  int32_t* tile_expert = nullptr;  // [max_tiles]
  int32_t* tile_start = nullptr;   // [max_tiles]
  int32_t* tile_end = nullptr;     // [max_tiles]
  int64_t max_tiles = 0;
};
void moe_sort(const int32_t* ids, int64_t pairs, int top_k, int num_experts, const MoeSort& s,
              cudaStream_t stream);

// For every tile's rows s: c[c_rows[s]] = a[a_rows[s]] . W_e^T (+ bias_e), W_e rows
// [e * n, (e + 1) * n) of w [E * n, k] bf16, bias f32 [E * n] or null. Null a_rows / c_rows
// mean the identity. f32 accumulation.
void moe_grouped_gemm(const __nv_bfloat16* a, int64_t lda, const int32_t* a_rows,
                      const __nv_bfloat16* w, const float* bias, int n, int k,
                      const int32_t* c_rows, float* c, int64_t ldc, const MoeSort& s,
                      cudaStream_t stream);

// out[t] += sum_j weights[t, j] * y[t * top_k + j] over the slots with a valid expert id;
// y [tokens * top_k, hidden] f32 in pair order. The sum runs over slots in order: no atomics,
// the same bits every run.
void moe_combine(const float* y, const float* weights, const int32_t* ids, int num_experts,
                 int64_t tokens, int top_k, int hidden, View out, cudaStream_t stream);

}  // namespace strata::cuda
