#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/skinny_gemm.h"  // skinny::has_avx512, skinny::with_rows

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

// A cache row, `floats` wide, asked for into L1 some keys before it is read: a head's rows are a
// few hundred bytes of rows kilobytes apart, in pages that hold two or three of them, a pattern
// the hardware prefetchers do not follow (perf: the scores loop read its keys at ~5 GB/s a core).
constexpr int kRowsAhead = 16;
void prefetch_row(const float* row, int floats) {
  for (int i = 0; i < floats; i += 16)
    _mm_prefetch(reinterpret_cast<const char*>(row + i), _MM_HINT_T0);
}

// The scores of keys [begin, end), four at a time.
void dots(const float* q, const PagedKV& kv, int kv_head, const int32_t* slots, int begin, int end,
          float* scores) {
  const int dk = kv.k_head_dim;
  auto row = [&](int j) { return key_row(kv, kv_head, slots, j); };
  int j = begin;
  for (; j + 4 <= end; j += 4) {
    for (int a = j + kRowsAhead; a < std::min(end, j + kRowsAhead + 4); ++a)
      prefetch_row(row(a), dk);
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
    if (d0 == 0 && j + kRowsAhead < end)
      prefetch_row(value_row(kv, kv_head, slots, j + kRowsAhead), kv.v_head_dim);
    const __m512 wj = _mm512_set1_ps(w[j - begin]);
    const float* v = value_row(kv, kv_head, slots, j) + d0;
    for (int c = 0; c < NV; ++c)
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(wj, _mm512_loadu_ps(v + 16 * c)));
  }
  for (int c = 0; c < NV; ++c) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

// The G heads of a query group (q rows dk apart) against one key row, read once for them all:
// s[g * s_stride] = q_g . k, each sum formed as dots_avx512 forms it (the same lanes, the same
// tree), so the bits are those of one head at a time.
template <int G>
__attribute__((target("avx512f"))) void group_dots_avx512(const float* q, int dk, const float* k,
                                                          float* s, int64_t s_stride) {
  __m512 lanes[G];
  for (int g = 0; g < G; ++g) lanes[g] = _mm512_setzero_ps();
  for (int d = 0; d < dk; d += 16) {
    const __m512 kd = _mm512_loadu_ps(k + d);
    for (int g = 0; g < G; ++g)
      lanes[g] = _mm512_add_ps(lanes[g], _mm512_mul_ps(_mm512_loadu_ps(q + g * dk + d), kd));
  }
  for (int g = 0; g < G; ++g) s[g * s_stride] = reduce_lanes(lanes[g]);
}

// weighted_rows_avx512 for the G heads of a group (weights w_g at w + g * w_stride, outputs at
// out + g * out_stride), each value row's 16 NV columns from d0 read once for them all; every
// head's sums in weighted_rows_avx512's order.
template <int G, int NV>
__attribute__((target("avx512f"))) void group_weighted_rows_avx512(const float* w, int64_t w_stride,
                                                                   const PagedKV& kv, int kv_head,
                                                                   int d0, const int32_t* slots,
                                                                   int begin, int end, float* out,
                                                                   int64_t out_stride) {
  __m512 acc[G][NV];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) acc[g][c] = _mm512_setzero_ps();
  for (int j = begin; j < end; ++j) {
    if (d0 == 0 && j + kRowsAhead < end)
      prefetch_row(value_row(kv, kv_head, slots, j + kRowsAhead), kv.v_head_dim);
    const float* v = value_row(kv, kv_head, slots, j) + d0;
    __m512 vc[NV];
    for (int c = 0; c < NV; ++c) vc[c] = _mm512_loadu_ps(v + 16 * c);
    for (int g = 0; g < G; ++g) {
      const __m512 wj = _mm512_set1_ps(w[g * w_stride + j - begin]);
      for (int c = 0; c < NV; ++c) acc[g][c] = _mm512_add_ps(acc[g][c], _mm512_mul_ps(wj, vc[c]));
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(out + g * out_stride + d0 + 16 * c, acc[g][c]);
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

// Heads of one KV head whose rows are read once for them all (more take several passes).
constexpr int kMaxGroup = 8;

// Scores (into scores + g * n) and weighted values (into out + g * out_stride) of `heads` <=
// kMaxGroup heads, 2 or more, on AVX-512: every key and value row read once for them all.
void group_dots(const float* q, int heads, const PagedKV& kv, int kv_head, const int32_t* slots,
                int begin, int end, float* scores) {
  const int64_t n = end - begin;
  skinny::with_rows(heads, [&]<int G>() {
    for (int j = begin; j < end; ++j) {
      if (j + kRowsAhead < end)
        prefetch_row(key_row(kv, kv_head, slots, j + kRowsAhead), kv.k_head_dim);
      group_dots_avx512<G>(q, kv.k_head_dim, key_row(kv, kv_head, slots, j), scores + (j - begin),
                           n);
    }
  });
}
void group_weighted_rows(const float* w, int heads, const PagedKV& kv, int kv_head,
                         const int32_t* slots, int begin, int end, float* out, int64_t out_stride) {
  const int64_t n = end - begin;
  const int dv = kv.v_head_dim;
  skinny::with_rows(heads, [&]<int G>() {
    // G * NV accumulators, NV value vectors and a weight in the 32 registers.
    constexpr int NV = G <= 2 ? 8 : G <= 4 ? 4 : 2;
    int d0 = 0;
    for (; d0 + 16 * NV <= dv; d0 += 16 * NV)
      group_weighted_rows_avx512<G, NV>(w, n, kv, kv_head, d0, slots, begin, end, out, out_stride);
    for (; d0 < dv; d0 += 16)
      group_weighted_rows_avx512<G, 1>(w, n, kv, kv_head, d0, slots, begin, end, out, out_stride);
  });
}

}  // namespace

void attend_range(const float* q, const PagedKV& kv, int kv_head, const int32_t* slots, int begin,
                  int end, const ScoreParams& p, float* scores, float* out, float* lse, Simd simd) {
  attend_group_range(q, 1, kv, kv_head, slots, begin, end, p, scores, out, 0, lse, 0, simd);
}

void attend_group_range(const float* q, int heads, const PagedKV& kv, int kv_head,
                        const int32_t* slots, int begin, int end, const ScoreParams& p,
                        float* scores, float* out, int64_t out_stride, float* lse,
                        int64_t lse_stride, Simd simd) {
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;
  const int64_t n = end - begin;
  for (int h = 0; h < heads; ++h) std::memset(out + h * out_stride, 0, sizeof(float) * dv);
  if (n <= 0) {
    for (int h = 0; h < heads; ++h) lse[h * lse_stride] = -std::numeric_limits<float>::infinity();
    return;
  }
  const bool avx512 =
      simd != Simd::Portable && dk % 16 == 0 && dv % 16 == 0 && skinny::has_avx512();
  // Raw q.k into `scores` (head h's at scores + h n): a group of heads on AVX-512 reads each key
  // row once for the group; one head reads four keys at a time (four independent sums).
  for (int h0 = 0; h0 < heads; h0 += kMaxGroup) {
    const int group = std::min(kMaxGroup, heads - h0);
    if (avx512 && group >= 2) {
      group_dots(q + h0 * dk, group, kv, kv_head, slots, begin, end, scores + h0 * n);
      continue;
    }
    for (int h = h0; h < h0 + group; ++h) {
      if (avx512) {
        dots(q + h * dk, kv, kv_head, slots, begin, end, scores + h * n);
      } else {
        for (int j = begin; j < end; ++j)
          scores[h * n + j - begin] = dot(q + h * dk, key_row(kv, kv_head, slots, j), dk);
      }
    }
  }
  // Scaled (and capped) in place, then the softmax weights in place of the scores; each head's
  // maximum waits in its lse slot, its sum in `sums`.
  thread_local std::vector<float> sums;
  sums.resize(heads);
  for (int h = 0; h < heads; ++h) {
    float* s = scores + h * n;
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      float v = s[j] * p.scale;
      if (p.softcap > 0.0f) v = p.softcap * std::tanh(v / p.softcap);
      s[j] = v;
      max_score = std::max(max_score, v);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - max_score);
      sum += s[j];
    }
    lse[h * lse_stride] = max_score;
    sums[h] = sum;
  }
  for (int h0 = 0; h0 < heads; h0 += kMaxGroup) {
    const int group = std::min(kMaxGroup, heads - h0);
    if (avx512 && group >= 2) {
      group_weighted_rows(scores + h0 * n, group, kv, kv_head, slots, begin, end,
                          out + h0 * out_stride, out_stride);
      continue;
    }
    for (int h = h0; h < h0 + group; ++h) {
      float* o = out + h * out_stride;
      if (avx512) {
        weighted_rows(scores + h * n, kv, kv_head, slots, begin, end, o);
      } else {
        for (int j = begin; j < end; ++j) {
          const float* v = value_row(kv, kv_head, slots, j);
          for (int d = 0; d < dv; ++d) o[d] += scores[h * n + j - begin] * v[d];
        }
      }
    }
  }
  for (int h = 0; h < heads; ++h) {
    const float inv = 1.0f / sums[h];
    float* o = out + h * out_stride;
    for (int d = 0; d < dv; ++d) o[d] *= inv;
    lse[h * lse_stride] += std::log(sums[h]);
  }
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
