#pragma once
// Shared by the decode and extend attention kernels (attention_decode.cu, attention_extend.cu):
// bf16 loads, the soft cap, and the shape check both entry points run before any launch.
#include <cmath>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"

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

// Decode stage 2 for query heads [h0, h0 + heads) of request b: out = sum_i e^{lse_i - M} o_i /
// (e^{sink - M} + sum_i e^{lse_i - M}) over the splits' partial outputs o_i and log-sum-exps
// lse_i, the sink term only with sinks (a logit with no value: it takes weight from every key).
// Each warp turns one head's log-sum-exps into weights (lane i: split i) in `weight`
// ([heads][kMaxDecodeSplits] of shared memory), so the loads of the partial outputs that follow
// are independent of each other: a loop that read each lse before its partial waited on a memory
// round trip per split, which at batch 1 (18 splits) took 10 us a layer. Partials are read
// through L2 (ld.cg): when the last split's block merges (the tensor-core kernel), other blocks
// of the same launch wrote them. The standalone stage 2 and that block run this one function.
static_assert(kMaxDecodeSplits <= 32, "the merge holds one split per lane of a warp");
template <typename OutT>
__device__ void merge_splits(const float* partial_out, const float* partial_lse, int num_q_heads,
                             int dv, int num_splits, int b, int h0, int heads,
                             const int32_t* token_offsets, const float* sinks, float* weight,
                             OutT* out) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int r = threadIdx.x / 32; r < heads; r += warps) {
    const int64_t first = (static_cast<int64_t>(b) * num_q_heads + h0 + r) * num_splits;
    const float lse = lane < num_splits ? __ldcg(partial_lse + first + lane) : kNegInf;
    const float sink = sinks ? sinks[h0 + r] : kNegInf;
    const float mx = fmaxf(warp_max(lse), sink);
    const float w = lse == kNegInf ? 0.0f : __expf(lse - mx);
    const float total = warp_sum(w) + (sink == kNegInf ? 0.0f : __expf(sink - mx));
    if (lane < num_splits) weight[r * kMaxDecodeSplits + lane] = total > 0.0f ? w / total : 0.0f;
  }
  __syncthreads();
  const int64_t out_row = static_cast<int64_t>(token_offsets[b]) * num_q_heads + h0;
  for (int idx = threadIdx.x; idx < heads * dv; idx += blockDim.x) {
    const int r = idx / dv, d = idx % dv;
    const int64_t first = (static_cast<int64_t>(b) * num_q_heads + h0 + r) * num_splits;
    const float* wr = weight + r * kMaxDecodeSplits;
    float acc = 0.0f;
#pragma unroll 4
    for (int i = 0; i < num_splits; ++i) acc += wr[i] * __ldcg(partial_out + (first + i) * dv + d);
    out[(out_row + r) * dv + d] = from_f32<OutT>(acc);
  }
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
