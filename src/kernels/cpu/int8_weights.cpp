// Quantization to the int8 formats of int8_weights.h: weights once at load, activations on
// every product. One rounding rule for both (and for every instruction set, so that the
// kernels at each SIMD level multiply the same integers): scale = max |v| / 127,
// q = round-to-nearest-even(v * (127 / max |v|)).
#include "kernels/cpu/int8_weights.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace strata::cpu::int8 {

namespace {

// One block of `len` (<= kBlockCols) values: q[kBlockCols] (zero past len), its scale and sum.
void quantize_block(const float* v, int64_t len, int8_t* q, float* scale, int32_t* sum) {
  float amax = 0.0f;
  for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(v[i]));
  std::memset(q, 0, kBlockCols);
  *scale = amax / 127.0f;
  *sum = 0;
  if (amax == 0.0f) return;
  const float inv = 127.0f / amax;
  for (int64_t i = 0; i < len; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(v[i] * inv), -127.0f, 127.0f));
    *sum += q[i];
  }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// A whole block of 64 with AVX-512: the same results as quantize_block (cvtps rounds to
// nearest even, like nearbyint; |v * inv| <= 127 within rounding, so no clamp is reached).
__attribute__((target("avx512f,avx512bw"))) void quantize_block64_avx512(const float* v, int8_t* q,
                                                                         float* scale,
                                                                         int32_t* sum) {
  __m512 x[4];
  __m512 amax = _mm512_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    x[j] = _mm512_loadu_ps(v + 16 * j);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(x[j]));
  }
  const float m = _mm512_reduce_max_ps(amax);
  *scale = m / 127.0f;
  if (m == 0.0f) {
    std::memset(q, 0, kBlockCols);
    *sum = 0;
    return;
  }
  const __m512 inv = _mm512_set1_ps(127.0f / m);
  __m512i total = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) {
    const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(x[j], inv));
    total = _mm512_add_epi32(total, qi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * j), _mm512_cvtepi32_epi8(qi));
  }
  *sum = _mm512_reduce_add_epi32(total);
}
#pragma GCC diagnostic pop

bool has_avx512bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return has;
}

}  // namespace

void quantize_group(const float* rows, int64_t count, int64_t k, uint8_t* group) {
  const int64_t nb = blocks(k);
  int8_t q[kBlockCols];
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* tile = group + b * kBlockBytes;
    float* scales = reinterpret_cast<float*>(tile + kTileBytes);
    std::memset(tile, 128, kTileBytes);
    for (int64_t lane = 0; lane < kGroupRows; ++lane) {
      scales[lane] = 0.0f;
      if (lane >= count) continue;
      const int64_t c0 = b * kBlockCols;
      int32_t unused_sum;
      const int64_t len = std::min(kBlockCols, k - c0);
      if (len == kBlockCols && has_avx512bw())
        quantize_block64_avx512(rows + lane * k + c0, q, &scales[lane], &unused_sum);
      else
        quantize_block(rows + lane * k + c0, len, q, &scales[lane], &unused_sum);
      for (int64_t c = 0; c < kBlockCols; ++c)
        tile[(c / 4) * kTileRowBytes + lane * 4 + c % 4] = static_cast<uint8_t>(q[c] + 128);
    }
  }
}

void dequantize_row(const uint8_t* packed, int64_t k, int64_t r, float* out) {
  const uint8_t* group = packed + (r / kGroupRows) * group_bytes(k);
  const int64_t lane = r % kGroupRows;
  for (int64_t c = 0; c < k; ++c) {
    const uint8_t* tile = group + (c / kBlockCols) * kBlockBytes;
    const int64_t in_block = c % kBlockCols;
    float scale;
    std::memcpy(&scale, tile + kTileBytes + lane * sizeof(float), sizeof(float));
    const int stored = tile[(in_block / 4) * kTileRowBytes + lane * 4 + in_block % 4];
    out[c] = static_cast<float>(stored - 128) * scale;
  }
}

void QuantizedRows::quantize(const float* x, int64_t m, int64_t k) {
  rows = m;
  blocks = int8::blocks(k);
  // Whole tiles of 16 rows: the AMX kernel loads activation rows 16 at a time (amx.h).
  values.resize(static_cast<size_t>((m + 15) / 16 * 16 * blocks * kBlockCols));
  scales.resize(static_cast<size_t>(m * blocks));
  sums.resize(static_cast<size_t>(m * blocks));
  const bool simd = has_avx512bw();
  // Decode rows are few: threads would cost more than they save.
#pragma omp parallel for schedule(static) if (m >= 16)
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kBlockCols, len = std::min(kBlockCols, k - c0);
      int8_t* q = values.data() + (r * blocks + b) * kBlockCols;
      float* s = &scales[r * blocks + b];
      int32_t* sum = &sums[r * blocks + b];
      if (simd && len == kBlockCols)
        quantize_block64_avx512(x + r * k + c0, q, s, sum);
      else
        quantize_block(x + r * k + c0, len, q, s, sum);
    }
}

}  // namespace strata::cpu::int8
