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

// MLA's latent (one KV head, the value the key row's leading columns) at DeepSeek V2/V3's
// widths, k 576 / v 512; no soft cap (no MLA model has one). Any number of query heads
// (blocks of 16 or 32, zero-padded). Sinks and windows behave as in the lane kernel (stage 2
// adds the sinks; the window bounds the keys the same way). The test fixtures' 80 / 64 latent
// stays on the lane kernel: the same kernel at that width (bf16 Q and P, as every tensor-core
// path here) moved deepseek_v3 prompt 2's logits by 0.150 at its first decode step, over the
// golden test's 0.136 (the prompt whose router is a near tie, tests/golden_suite.cpp).
inline bool mla_tiles_take(const DeviceKV& kv, const AttentionParams& p, const PagedBatch& b) {
  return kv.k_head_dim == 576 && kv.v_head_dim == 512 && kv.num_kv_heads == 1 &&
         value_inside_key(kv) && p.softcap == 0.0f && kv.k_row_stride % 8 == 0 &&
         p.q_row_stride % 2 == 0 && b.batch <= 65535 /*grid z*/;
}

// extend_attention's contract; p.q_row_stride already resolved. Each warp owns
// `rows_per_warp` query rows, 16 or 32.
template <typename OutT>
void extend_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                  const AttentionParams& p, int max_extend, OutT* out, cudaStream_t stream,
                  int rows_per_warp);

// decode_attention's stage 1 (partials and log-sum-exp per split); p.q_row_stride resolved.
void decode_tiles_stage1(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                         const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream);
// The same for mla_tiles_take's layouts (attention_decode_mla.cu).
void decode_mla_stage1(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                       const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream);

}  // namespace strata::cuda::attention_detail
