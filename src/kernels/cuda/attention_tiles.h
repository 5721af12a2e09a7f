#pragma once
// The tensor-core attention kernels (attention_extend_tiles.cu, attention_decode_tiles.cu)
// behind extend_attention and decode_attention, for the layouts they take; the general
// kernels in attention_extend.cu and attention_decode.cu serve every other layout.
#include "kernels/cuda/attention_common.cuh"

namespace strata::cuda::attention_detail {

// Head width 64 or 128, the value as wide as the key and in its own rows, rows in whole
// 16-byte chunks (cp.async's unit) and q rows in float pairs.
inline bool tiles_take(const DeviceKV& kv, const AttentionParams& p) {
  const int d = kv.k_head_dim;
  return (d == 64 || d == 128) && kv.v_head_dim == d && !value_inside_key(kv) &&
         kv.k_row_stride % 8 == 0 && kv.v_row_stride % 8 == 0 && p.q_row_stride % 2 == 0;
}

// extend_attention's contract; p.q_row_stride already resolved.
template <typename OutT>
void extend_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                  const AttentionParams& p, int max_extend, OutT* out, cudaStream_t stream);

// decode_attention's stage 1 (partials and log-sum-exp per split); p.q_row_stride resolved.
void decode_tiles_stage1(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                         const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream);

}  // namespace strata::cuda::attention_detail
