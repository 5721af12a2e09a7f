#pragma once
// The pieces both tensor-core attention kernels (attention_extend_tiles.cu,
// attention_decode_tiles.cu) are made of, in mma.sync's fragment layout: a lane holds rows
// r0 = lane / 4 and r1 = r0 + 8 of a 16-row tile, columns 2 (lane % 4) and 2 (lane % 4) + 1 of
// every 8-column accumulator tile.
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/tensor_core_ptx.cuh"

namespace strata::cuda::attention_detail {

// The A fragments of Q rows q0 and q1 (f32, zeros where !ok), scaled and rounded to bf16, for
// QK_STEPS steps of 16 columns.
template <int QK_STEPS>
__device__ __forceinline__ void load_q_fragments(const float* q0, bool ok0, const float* q1,
                                                 bool ok1, int t, float scale,
                                                 uint32_t (&qf)[QK_STEPS][4]) {
  auto ld = [&](const float* row, bool ok, int c) {
    const float2 v = ok ? *reinterpret_cast<const float2*>(row + c) : make_float2(0.0f, 0.0f);
    return pack_bf16(v.x * scale, v.y * scale);
  };
#pragma unroll
  for (int ks = 0; ks < QK_STEPS; ++ks) {
    const int c = ks * 16 + 2 * t;
    qf[ks][0] = ld(q0, ok0, c), qf[ks][1] = ld(q1, ok1, c);
    qf[ks][2] = ld(q0, ok0, c + 8), qf[ks][3] = ld(q1, ok1, c + 8);
  }
}

// One tile of the online softmax on rows r0 (elements 0, 1) and r1 (2, 3), scores in log2
// units: P = exp2(S - max) replaces S in place, O and this lane's part of each row's sum are
// rescaled to the new maximum. The four lanes of a quad share a row (their maxima are
// reduced; the sums stay per lane until the end).
template <int S_TILES, int O_TILES>
__device__ __forceinline__ void online_softmax_tile(float (&s)[S_TILES][4], float (&row_max)[2],
                                                    float (&row_sum)[2], float (&o)[O_TILES][4]) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float mx = kNegInf;
#pragma unroll
    for (int j = 0; j < S_TILES; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * rr], s[j][2 * rr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(row_max[rr], mx);
    // A row with no key yet subtracts 0, so exp2(-inf - 0) = 0 and never NaN.
    const float base = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = exp2f(row_max[rr] - base);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < S_TILES; ++j) {
      s[j][2 * rr] = exp2f(s[j][2 * rr] - base);
      s[j][2 * rr + 1] = exp2f(s[j][2 * rr + 1] - base);
      sum += s[j][2 * rr] + s[j][2 * rr + 1];
    }
    row_sum[rr] = row_sum[rr] * alpha + sum;
    row_max[rr] = m_new;
#pragma unroll
    for (int j = 0; j < O_TILES; ++j) o[j][2 * rr] *= alpha, o[j][2 * rr + 1] *= alpha;
  }
}

}  // namespace strata::cuda::attention_detail
