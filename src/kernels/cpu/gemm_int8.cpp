// cpu::linear_int8 (gemm.h): int8 weights packed as int8_weights.h lays them out, activations
// quantized per row and block on the fly, int32 dot products per block, f32 sums:
//   y[r, j] = bias[j] + sum_b sw[j, b] * sx[r, b] * sum_{c in b} w[j, c] * x[r, c].
// One loop for every shape: the threads split the groups of 16 weight rows; each group is read
// once per chunk of up to 8 input rows (decode: once), its 16 rows side by side in the lanes of
// one vector, so a product needs no horizontal sums and a group streams from memory as one run
// of contiguous bytes. Prefill reuses each group from cache for all its chunks.
// Kernels: AVX-512 VNNI (vpdpbusd), AVX2 (vpmaddubsw with the sign trick, exact for int8 in
// [-127, 127]) and a portable loop; all three compute the same integers (the tests compare
// them). AMX-INT8 could take prefill shapes (its B tile is this layout) on CPUs that have it.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_amx.h"
#include "kernels/cpu/int8_weights.h"
#include "kernels/cpu/skinny_gemm.h"

namespace strata::cpu {

namespace {

using int8::kBlockBytes;
using int8::kGroupRows;
using int8::kTileBytes;
using int8::kTileRowBytes;
using int8::QuantizedRows;

constexpr int64_t kMaxChunkRows = 8;
// How far ahead of the block being multiplied the next weights are requested (bytes): a few
// blocks, enough to cover the memory latency at the rate one core multiplies.
constexpr int64_t kPrefetchBytes = 4 * kBlockBytes;

bool has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

// The 4 activation bytes that tile row i of block b multiplies, as one int32.
inline int32_t quad(const QuantizedRows& x, int64_t r, int64_t b, int i) {
  int32_t v;
  std::memcpy(&v, x.row(r) + b * int8::kBlockCols + 4 * i, sizeof(v));
  return v;
}

// out[(gg * R + r) * 16 + lane] = sum over the blocks of group gg (of G adjacent groups, `stride`
// bytes apart) for input rows r0..r0+R-1, one kernel per instruction set. G > 1 is for narrow
// batches: one group is one sequential run of bytes, and one stream per core does not keep
// enough misses in flight to reach the memory's rate (strata_membw: 2 streams on 2 cores read
// ~2/3 of what 8 do); each group's sums are formed exactly as with G = 1.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int R, int G>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void group_avx512(
    const QuantizedRows& x, int64_t r0, const uint8_t* group, int64_t stride, float* out) {
  __m512 acc[G][R];
  for (int gg = 0; gg < G; ++gg)
    for (int r = 0; r < R; ++r) acc[gg][r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* tile = group + b * kBlockBytes;
    for (int gg = 0; gg < G; ++gg)
      for (int64_t line = 0; line < kBlockBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(tile + gg * stride + kPrefetchBytes + line),
                     _MM_HINT_T0);
    // Two sums per row over alternate tile rows: one chain of 16 dependent vpdpbusd would
    // bound a single row's decode by the instruction's latency.
    __m512i dot[G][R][2];
    for (int gg = 0; gg < G; ++gg)
      for (int r = 0; r < R; ++r) dot[gg][r][0] = dot[gg][r][1] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      __m512i xq[R];
      for (int r = 0; r < R; ++r) xq[r] = _mm512_set1_epi32(quad(x, r0 + r, b, i));
      for (int gg = 0; gg < G; ++gg) {
        const __m512i w = _mm512_loadu_si512(tile + gg * stride + i * kTileRowBytes);
        for (int r = 0; r < R; ++r)
          dot[gg][r][i % 2] = _mm512_dpbusd_epi32(dot[gg][r][i % 2], w, xq[r]);
      }
    }
    for (int gg = 0; gg < G; ++gg) {
      const __m512 sw =
          _mm512_loadu_ps(reinterpret_cast<const float*>(tile + gg * stride + kTileBytes));
      for (int r = 0; r < R; ++r) {
        const int64_t at = (r0 + r) * x.blocks + b;
        // The weights were stored + 128: take 128 * sum(x) back out of every lane.
        const __m512i exact = _mm512_sub_epi32(_mm512_add_epi32(dot[gg][r][0], dot[gg][r][1]),
                                               _mm512_set1_epi32(128 * x.sums[at]));
        acc[gg][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact),
                                     _mm512_mul_ps(sw, _mm512_set1_ps(x.scales[at])), acc[gg][r]);
      }
    }
  }
  for (int gg = 0; gg < G; ++gg)
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + (gg * R + r) * kGroupRows, acc[gg][r]);
}
#pragma GCC diagnostic pop

// The same with 256-bit vectors, each tile row as two halves of 8 weight rows. vpmaddubsw
// multiplies unsigned by signed bytes into saturating 16-bit pairs, so the weights go in as
// |w| and the activations take w's sign (|w| * |x| <= 127 * 127: a pair never saturates).
template <int R, int G>
__attribute__((target("avx2,fma"))) void group_avx2(const QuantizedRows& x, int64_t r0,
                                                    const uint8_t* group, int64_t stride,
                                                    float* out) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[G][R][2];
  for (int gg = 0; gg < G; ++gg)
    for (int r = 0; r < R; ++r) acc[gg][r][0] = acc[gg][r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* tile = group + b * kBlockBytes;
    __m256i dot[G][R][2];
    for (int gg = 0; gg < G; ++gg)
      for (int r = 0; r < R; ++r) dot[gg][r][0] = dot[gg][r][1] = _mm256_setzero_si256();
    for (int i = 0; i < 16; ++i) {
      __m256i xq[R];
      for (int r = 0; r < R; ++r) xq[r] = _mm256_set1_epi32(quad(x, r0 + r, b, i));
      for (int gg = 0; gg < G; ++gg)
        for (int h = 0; h < 2; ++h) {
          // Stored w + 128; xor 0x80 gives w as a signed byte.
          const __m256i w = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                 tile + gg * stride + i * kTileRowBytes + 32 * h)),
                                             flip);
          const __m256i w_abs = _mm256_abs_epi8(w);
          for (int r = 0; r < R; ++r) {
            const __m256i xs = _mm256_sign_epi8(xq[r], w);
            dot[gg][r][h] = _mm256_add_epi32(
                dot[gg][r][h], _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, xs), ones));
          }
        }
    }
    for (int gg = 0; gg < G; ++gg) {
      const float* sw = reinterpret_cast<const float*>(tile + gg * stride + kTileBytes);
      for (int r = 0; r < R; ++r) {
        const __m256 sx = _mm256_set1_ps(x.scales[(r0 + r) * x.blocks + b]);
        for (int h = 0; h < 2; ++h)
          acc[gg][r][h] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[gg][r][h]),
                              _mm256_mul_ps(_mm256_loadu_ps(sw + 8 * h), sx), acc[gg][r][h]);
      }
    }
  }
  for (int gg = 0; gg < G; ++gg)
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(out + (gg * R + r) * kGroupRows + 8 * h, acc[gg][r][h]);
}

// Any CPU: the definition the others are tested against.
void group_portable(const QuantizedRows& x, int64_t r0, int64_t rows, const uint8_t* group,
                    float* out) {
  std::fill_n(out, rows * kGroupRows, 0.0f);
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* tile = group + b * kBlockBytes;
    float sw[kGroupRows];
    std::memcpy(sw, tile + kTileBytes, sizeof(sw));
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* xb = x.row(r0 + r) + b * int8::kBlockCols;
      const float sx = x.scales[(r0 + r) * x.blocks + b];
      for (int64_t lane = 0; lane < kGroupRows; ++lane) {
        int32_t dot = 0;
        for (int64_t c = 0; c < int8::kBlockCols; ++c)
          dot += (tile[(c / 4) * kTileRowBytes + lane * 4 + c % 4] - 128) * xb[c];
        out[r * kGroupRows + lane] += static_cast<float>(dot) * (sw[lane] * sx);
      }
    }
  }
}

// Groups a pass of `rows` input rows takes at once (the kernels' G): several for the narrowest
// batches, within the registers (AVX-512: 32, AVX2: 16).
int64_t groups_per_pass(Simd level, int64_t rows) {
  if (level == Simd::Avx512) return rows == 1 ? 4 : rows == 2 ? 2 : 1;
  if (level == Simd::Avx2) return rows == 1 ? 2 : 1;
  return 1;
}

// `count` adjacent groups (at most groups_per_pass) against rows r0..r0+rows-1; out holds
// count * rows * 16 sums, group by group.
void group_product(Simd level, const QuantizedRows& x, int64_t r0, int64_t rows,
                   const uint8_t* group, int64_t stride, int64_t count, float* out) {
  if (level == Simd::Portable) {
    for (int64_t gg = 0; gg < count; ++gg)
      group_portable(x, r0, rows, group + gg * stride, out + gg * rows * kGroupRows);
    return;
  }
  skinny::with_rows(rows, [&]<int R>() {
    if (level == Simd::Avx512) {
      if constexpr (R == 1)
        if (count == 4) return group_avx512<1, 4>(x, r0, group, stride, out);
      if constexpr (R == 2)
        if (count == 2) return group_avx512<2, 2>(x, r0, group, stride, out);
      for (int64_t gg = 0; gg < count; ++gg)
        group_avx512<R, 1>(x, r0, group + gg * stride, stride, out + gg * R * kGroupRows);
      return;
    }
    if constexpr (R == 1)
      if (count == 2) return group_avx2<1, 2>(x, r0, group, stride, out);
    for (int64_t gg = 0; gg < count; ++gg)
      group_avx2<R, 1>(x, r0, group + gg * stride, stride, out + gg * R * kGroupRows);
  });
}

// The instruction set `simd` asks for, or the best below it that this CPU has (AMX-INT8 takes
// only prefill shapes: see amx_product).
Simd resolve(Simd simd, int64_t m) {
  if ((simd == Simd::Best || simd == Simd::Amx) && m > kMaxChunkRows && amx::has_int8())
    return Simd::Amx;
  if ((simd == Simd::Best || simd == Simd::Amx || simd == Simd::Avx512) && has_avx512_vnni())
    return Simd::Avx512;
  if (simd != Simd::Portable && skinny::has_avx2_fma()) return Simd::Avx2;
  return Simd::Portable;
}

// y[r, j] for the lanes [lane0, lane1) of group g: bias + the group's sums `out` (row r of out
// is out_row0 + r of y).
void write_rows(const float* out, int64_t out_row0, int64_t rows, int64_t g, int64_t lane0,
                int64_t lane1, int64_t row0, int64_t n, const float* bias, float* y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t lane = lane0; lane < lane1; ++lane) {
      const int64_t j = g * kGroupRows + lane - row0;
      y[(out_row0 + r) * n + j] = (bias ? bias[j] : 0.0f) + out[r * kGroupRows + lane];
    }
}

}  // namespace

void linear_int8(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t row0, int64_t n,
                 const float* bias, float* y, Simd simd) {
  if (m == 0 || n == 0) return;
  // Kept between calls: a decode step quantizes its rows for every projection.
  thread_local QuantizedRows quantized;
  quantized.quantize(x, m, k);
  // The threads of the loop below each have their own thread_local: name this one.
  const QuantizedRows& xq = quantized;
  const Simd level = resolve(simd, m);
  const int64_t first = row0 / kGroupRows, last = int8::groups(row0 + n);
  const int64_t stride = int8::group_bytes(k);
  // Lanes of group g inside rows [row0, row0 + n).
  auto lanes = [&](int64_t g) {
    return std::pair{std::max<int64_t>(row0 - g * kGroupRows, 0),
                     std::min<int64_t>(row0 + n - g * kGroupRows, kGroupRows)};
  };
  if (level == Simd::Amx) {
#pragma omp parallel
    {
      amx::Tiles tiles;  // this thread's tile configuration, released at the end
      alignas(64) float out[amx::kRowBlock * kGroupRows];
#pragma omp for schedule(static)
      for (int64_t g = first; g < last; ++g)
        for (int64_t r0 = 0; r0 < m; r0 += amx::kRowBlock) {
          const int64_t rows = std::min(amx::kRowBlock, m - r0);
          amx::group_product(xq, r0, rows, w + g * stride, out);
          const auto [lane0, lane1] = lanes(g);
          write_rows(out, r0, rows, g, lane0, lane1, row0, n, bias, y);
        }
    }
    return;
  }
  // Decode (m <= 8) takes `per_pass` groups at once; prefill one group, in chunks of 8 rows.
  const int64_t per_pass = groups_per_pass(level, std::min(m, kMaxChunkRows));
  const int64_t passes = (last - first + per_pass - 1) / per_pass;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < passes; ++p) {
    const int64_t g0 = first + p * per_pass, count = std::min(per_pass, last - g0);
    alignas(64) float out[4 * kMaxChunkRows * kGroupRows];
    for (int64_t r0 = 0; r0 < m; r0 += kMaxChunkRows) {
      const int64_t rows = std::min(kMaxChunkRows, m - r0);
      group_product(level, xq, r0, rows, w + g0 * stride, stride, count, out);
      for (int64_t gg = 0; gg < count; ++gg) {
        const auto [lane0, lane1] = lanes(g0 + gg);
        write_rows(out + gg * rows * kGroupRows, r0, rows, g0 + gg, lane0, lane1, row0, n, bias, y);
      }
    }
  }
}

}  // namespace strata::cpu
