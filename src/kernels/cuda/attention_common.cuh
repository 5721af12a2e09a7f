#pragma once
// Shared by the decode and extend attention kernels (attention_decode.cu, attention_extend.cu):
// bf16 loads, the soft cap, and the shape check both entry points run before any launch.
#include <cmath>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"

namespace strata::cuda::attention_detail {

constexpr float kNegInf = -INFINITY;

// Eight bf16 at `p` (16 bytes, aligned) as floats; zeros when out of range.
__device__ __forceinline__ void load8(const bf16* p, bool in_range, float (&out)[8]) {
  if (!in_range) {
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = 0.0f;
    return;
  }
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

// The keys [begin, end) that split `split` of `num_splits` attends for request b's new decode
// token: an equal share of [lo, pos], lo the sliding window's first key (else 0); empty past
// the end. Every decode kernel splits the same way, so stage 2 merges any of them.
struct DecodeSplit {
  int begin, end;
};
__device__ __forceinline__ DecodeSplit decode_split(const PagedBatch& batch,
                                                    const AttentionParams& p, int b, int split,
                                                    int num_splits) {
  const int pos = batch.prefix_lens[b];  // the new token; its key is already in the cache
  const int lo = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0, hi = pos + 1;
  const int span = (hi - lo + num_splits - 1) / num_splits;
  const int begin = min(hi, lo + split * span);
  return {begin, min(hi, begin + span)};
}

// Request b's row of the request-to-token table: the cache slot of each of its positions.
__device__ __forceinline__ const int32_t* request_slots(const PagedBatch& batch, int b) {
  return batch.req_to_token +
         static_cast<int64_t>(batch.req_pool_indices[b]) * batch.req_to_token_stride;
}

__device__ __forceinline__ float soft_cap(float s, float cap) {
  return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

// `max_width`: what the calling kernel takes (kMaxDecodeHeadWidth, kMaxExtendHeadWidth).
inline void check_shapes(const DeviceKV& kv, const AttentionParams& p, int max_width,
                         const char* kernel) {
  if (kv.num_kv_heads <= 0 || p.num_q_heads % kv.num_kv_heads != 0)
    throw_error("cuda attention: " + std::to_string(p.num_q_heads) +
                " query heads do not group over " + std::to_string(kv.num_kv_heads) + " KV heads");
  if (kv.k_head_dim % 8 != 0 || kv.v_head_dim % 8 != 0 || kv.k_head_dim > max_width ||
      kv.v_head_dim > max_width)
    throw_error(std::string("cuda ") + kernel +
                " attention supports head widths that are multiples of 8 up to " +
                std::to_string(max_width) + "; this layer's cache is k " +
                std::to_string(kv.k_head_dim) + " / v " + std::to_string(kv.v_head_dim) +
                " wide: use --device cpu for this model");
}

// The value is the leading v_head_dim columns of each key row (MLA's latent): the extend
// kernel then reads one tile for both. With several KV heads this holds only when the
// per-head offsets agree (dk == dv).
inline bool value_inside_key(const DeviceKV& kv) {
  return kv.v == kv.k && kv.v_row_stride == kv.k_row_stride && kv.v_head_dim <= kv.k_head_dim &&
         (kv.num_kv_heads == 1 || kv.k_head_dim == kv.v_head_dim);
}

}  // namespace strata::cuda::attention_detail
