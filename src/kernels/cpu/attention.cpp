#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/skinny_gemm.h"  // skinny::has_avx512

namespace strata::cpu {

namespace {

// q . k over n floats as 16 interleaved partial sums added in a fixed tree at the end: the
// lanes are independent, so the compiler keeps them in vector registers of whatever width the
// build targets and the result is the same bit for bit on every CPU. (One running sum was a
// chain of n dependent adds: at 128 wide, about 500 cycles a key, 10% of an int8 decode step.)
float dot(const float* q, const float* k, int n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += q[d + l] * k[d + l];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  float s = lanes[0];
  for (; d < n; ++d) s += q[d] * k[d];
  return s;
}

// The same sums on AVX-512, for widths in whole vectors: one vector is dot's 16 lanes and the
// tree adds the same pairs, so the result is bit-equal (this file is built with
// -ffp-contract=off: a fused multiply-add would round differently from the portable path).
// Before, the portable loops ran at the build's base SIMD width (SSE2) and the output row
// went through memory once per key: about 10% of an int8 decode step at 160 positions.
// (GCC 12 warns inside its own AVX-512 intrinsics, whose masked forms start from undefined
// registers: a known false positive, silenced for these kernels only.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) float reduce_lanes(__m512 lanes) {
  const __m256 w8 =
      _mm256_add_ps(_mm512_castps512_ps256(lanes),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lanes), 1)));
  const __m128 w4 = _mm_add_ps(_mm256_castps256_ps128(w8), _mm256_extractf128_ps(w8, 1));
  const __m128 w2 = _mm_add_ps(w4, _mm_movehl_ps(w4, w4));
  return _mm_cvtss_f32(_mm_add_ss(w2, _mm_shuffle_ps(w2, w2, 1)));
}

// s[i] = q . k_i for the K keys at `rows` side by side: each key's sum is one dependent chain,
// so several keys at once keep the adder busy.
template <int K>
__attribute__((target("avx512f"))) void dots_avx512(const float* q, const float* const* rows, int n,
                                                    float* s) {
  __m512 lanes[K];
  for (int i = 0; i < K; ++i) lanes[i] = _mm512_setzero_ps();
  for (int d = 0; d < n; d += 16) {
    const __m512 qd = _mm512_loadu_ps(q + d);
    for (int i = 0; i < K; ++i)
      lanes[i] = _mm512_add_ps(lanes[i], _mm512_mul_ps(qd, _mm512_loadu_ps(rows[i] + d)));
  }
  for (int i = 0; i < K; ++i) s[i] = reduce_lanes(lanes[i]);
}

const float* key_row(const PagedKV& kv, int kv_head, const int32_t* slots, int j) {
  return kv.k + static_cast<int64_t>(slots[j]) * kv.k_row_stride + kv_head * kv.k_head_dim;
}
const float* value_row(const PagedKV& kv, int kv_head, const int32_t* slots, int j) {
  return kv.v + static_cast<int64_t>(slots[j]) * kv.v_row_stride + kv_head * kv.v_head_dim;
}

// The scores of keys [begin, end), four at a time.
void dots(const float* q, const PagedKV& kv, int kv_head, const int32_t* slots, int begin, int end,
          float* scores) {
  const int dk = kv.k_head_dim;
  auto row = [&](int j) { return key_row(kv, kv_head, slots, j); };
  int j = begin;
  for (; j + 4 <= end; j += 4) {
    const float* rows[4] = {row(j), row(j + 1), row(j + 2), row(j + 3)};
    dots_avx512<4>(q, rows, dk, scores + (j - begin));
  }
  for (; j < end; ++j) {
    const float* rows[1] = {row(j)};
    dots_avx512<1>(q, rows, dk, scores + (j - begin));
  }
}

// out[0, 16 NV) = sum_j w_j v_j[d0, d0 + 16 NV), the keys in order, the sums in registers.
template <int NV>
__attribute__((target("avx512f"))) void weighted_rows_avx512(const float* w, const PagedKV& kv,
                                                             int kv_head, int d0,
                                                             const int32_t* slots, int begin,
                                                             int end, float* out) {
  __m512 acc[NV];
  for (int c = 0; c < NV; ++c) acc[c] = _mm512_setzero_ps();
  for (int j = begin; j < end; ++j) {
    const __m512 wj = _mm512_set1_ps(w[j - begin]);
    const float* v = value_row(kv, kv_head, slots, j) + d0;
    for (int c = 0; c < NV; ++c)
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(wj, _mm512_loadu_ps(v + 16 * c)));
  }
  for (int c = 0; c < NV; ++c) _mm512_storeu_ps(out + 16 * c, acc[c]);
}
#pragma GCC diagnostic pop

void weighted_rows(const float* w, const PagedKV& kv, int kv_head, const int32_t* slots, int begin,
                   int end, float* out) {
  using Rows = void (*)(const float*, const PagedKV&, int, int, const int32_t*, int, int, float*);
  static constexpr Rows kByVectors[] = {weighted_rows_avx512<1>, weighted_rows_avx512<2>,
                                        weighted_rows_avx512<3>, weighted_rows_avx512<4>,
                                        weighted_rows_avx512<5>, weighted_rows_avx512<6>,
                                        weighted_rows_avx512<7>, weighted_rows_avx512<8>};
  const int dv = kv.v_head_dim;
  for (int d0 = 0; d0 < dv; d0 += 128)  // eight vectors of the row at a time
    kByVectors[std::min(dv - d0, 128) / 16 - 1](w, kv, kv_head, d0, slots, begin, end, out + d0);
}

}  // namespace

void attend_range(const float* q, const PagedKV& kv, int kv_head, const int32_t* slots, int begin,
                  int end, const ScoreParams& p, float* scores, float* out, float* lse, Simd simd) {
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;
  std::memset(out, 0, sizeof(float) * dv);
  if (end <= begin) {
    *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  const bool avx512 =
      simd != Simd::Portable && dk % 16 == 0 && dv % 16 == 0 && skinny::has_avx512();
  // Raw q.k into `scores`, then scaled (and capped) in place.
  if (avx512) {
    dots(q, kv, kv_head, slots, begin, end, scores);
  } else {
    for (int j = begin; j < end; ++j)
      scores[j - begin] = dot(q, key_row(kv, kv_head, slots, j), dk);
  }
  float max_score = -std::numeric_limits<float>::infinity();
  for (int j = begin; j < end; ++j) {
    float s = scores[j - begin] * p.scale;
    if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
    scores[j - begin] = s;
    max_score = std::max(max_score, s);
  }
  // The softmax weights in place of the scores, then the weighted value rows.
  float sum = 0.0f;
  for (int j = begin; j < end; ++j) {
    scores[j - begin] = std::exp(scores[j - begin] - max_score);
    sum += scores[j - begin];
  }
  if (avx512) {
    weighted_rows(scores, kv, kv_head, slots, begin, end, out);
  } else {
    for (int j = begin; j < end; ++j) {
      const float* v = value_row(kv, kv_head, slots, j);
      for (int d = 0; d < dv; ++d) out[d] += scores[j - begin] * v[d];
    }
  }
  const float inv = 1.0f / sum;
  for (int d = 0; d < dv; ++d) out[d] *= inv;
  *lse = max_score + std::log(sum);
}

void merge_partials(const float* partial_out, const float* partial_lse, int n, int dv, float sink,
                    float* out) {
  float m = sink;
  for (int i = 0; i < n; ++i) m = std::max(m, partial_lse[i]);
  std::memset(out, 0, sizeof(float) * dv);
  if (std::isinf(m) && m < 0) return;  // nothing to attend to
  float denom = std::isinf(sink) ? 0.0f : std::exp(sink - m);
  for (int i = 0; i < n; ++i) {
    if (std::isinf(partial_lse[i])) continue;
    const float w = std::exp(partial_lse[i] - m);
    denom += w;
    for (int d = 0; d < dv; ++d) out[d] += w * partial_out[static_cast<int64_t>(i) * dv + d];
  }
  const float inv = 1.0f / denom;
  for (int d = 0; d < dv; ++d) out[d] *= inv;
}

}  // namespace strata::cpu
