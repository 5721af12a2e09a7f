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

#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm.h"
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
// Decode passes of up to this many rows read two groups side by side (linear_int8).
constexpr int64_t kPairedRows = 2;
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

// out[r * 16 + lane] = sum over the group's blocks for input rows r0..r0+R-1, one kernel per
// instruction set.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// G groups side by side, `step` bytes apart (out: G * R * 16 sums, group after group). Narrow
// decode passes take two groups of different runs (see linear_int8): two streams a core.
template <int R, int G = 1>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void group_avx512(
    const QuantizedRows& x, int64_t r0, const uint8_t* group, float* out, int64_t step = 0) {
  __m512 acc[G][R];
  for (int gi = 0; gi < G; ++gi)
    for (int r = 0; r < R; ++r) acc[gi][r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b)
    for (int gi = 0; gi < G; ++gi) {
      const uint8_t* tile = group + gi * step + b * kBlockBytes;
      for (int64_t line = 0; line < kBlockBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(tile + kPrefetchBytes + line), _MM_HINT_T0);
      // Two sums per row over alternate tile rows: one chain of 16 dependent vpdpbusd would
      // bound a single row's decode by the instruction's latency.
      __m512i dot[R][2];
      for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const __m512i w = _mm512_loadu_si512(tile + i * kTileRowBytes);
        for (int r = 0; r < R; ++r)
          dot[r][i % 2] =
              _mm512_dpbusd_epi32(dot[r][i % 2], w, _mm512_set1_epi32(quad(x, r0 + r, b, i)));
      }
      const __m512 sw = _mm512_loadu_ps(reinterpret_cast<const float*>(tile + kTileBytes));
      for (int r = 0; r < R; ++r) {
        const int64_t at = (r0 + r) * x.blocks + b;
        // The weights were stored + 128: take 128 * sum(x) back out of every lane.
        const __m512i exact = _mm512_sub_epi32(_mm512_add_epi32(dot[r][0], dot[r][1]),
                                               _mm512_set1_epi32(128 * x.sums[at]));
        acc[gi][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact),
                                     _mm512_mul_ps(sw, _mm512_set1_ps(x.scales[at])), acc[gi][r]);
      }
    }
  for (int gi = 0; gi < G; ++gi)
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + (gi * R + r) * kGroupRows, acc[gi][r]);
}
#pragma GCC diagnostic pop

// The same with 256-bit vectors, each tile row as two halves of 8 weight rows. vpmaddubsw
// multiplies unsigned by signed bytes into saturating 16-bit pairs, so the weights go in as
// |w| and the activations take w's sign (|w| * |x| <= 127 * 127: a pair never saturates).
template <int R>
__attribute__((target("avx2,fma"))) void group_avx2(const QuantizedRows& x, int64_t r0,
                                                    const uint8_t* group, float* out) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* tile = group + b * kBlockBytes;
    __m256i dot[R][2];
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm256_setzero_si256();
    for (int i = 0; i < 16; ++i)
      for (int h = 0; h < 2; ++h) {
        // Stored w + 128; xor 0x80 gives w as a signed byte.
        const __m256i w = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + i * kTileRowBytes + 32 * h)),
            flip);
        const __m256i w_abs = _mm256_abs_epi8(w);
        for (int r = 0; r < R; ++r) {
          const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(quad(x, r0 + r, b, i)), w);
          dot[r][h] =
              _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, xs), ones));
        }
      }
    const float* sw = reinterpret_cast<const float*>(tile + kTileBytes);
    for (int r = 0; r < R; ++r) {
      const __m256 sx = _mm256_set1_ps(x.scales[(r0 + r) * x.blocks + b]);
      for (int h = 0; h < 2; ++h)
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][h]),
                                    _mm256_mul_ps(_mm256_loadu_ps(sw + 8 * h), sx), acc[r][h]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + r * kGroupRows + 8 * h, acc[r][h]);
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

void group_product(Simd level, const QuantizedRows& x, int64_t r0, int64_t rows,
                   const uint8_t* group, float* out) {
  if (level == Simd::Portable) return group_portable(x, r0, rows, group, out);
  skinny::with_rows(rows, [&]<int R>() {
    if (level == Simd::Avx512) return group_avx512<R>(x, r0, group, out);
    group_avx2<R>(x, r0, group, out);
  });
}

// The instruction set `simd` asks for, or the best below it that this CPU has (AMX-INT8 takes
// only prefill shapes: kernels/cpu/amx.h).
Simd resolve(Simd simd, int64_t m) {
  if ((simd == Simd::Best || simd == Simd::Amx) && m > kMaxChunkRows && amx::has_int8())
    return Simd::Amx;
  if ((simd == Simd::Best || simd == Simd::Amx || simd == Simd::Avx512Bf16 ||
       simd == Simd::Avx512) &&
      has_avx512_vnni())
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
  if (level == Simd::Avx512 && m <= kPairedRows) {
    // Decode of 1-2 rows: each thread cuts its groups into two runs and reads one group of each
    // side by side, so a core has two streams in flight where one group after another was one
    // (strata_membw on the Zen 4 VM: 36 GB/s with a stream a core, 47 with four). Each group's
    // sums are formed exactly as alone.
    auto write = [&](const float* sums, int64_t g) {
      const auto [lane0, lane1] = lanes(g);
      write_rows(sums, 0, m, g, lane0, lane1, row0, n, bias, y);
    };
    skinny::in_runs<2>(
        last - first, stride,
        [&](int64_t i, int64_t run) {
          alignas(64) float out[2 * kPairedRows * kGroupRows];
          const int64_t g = first + i;
          skinny::with_rows(m, [&]<int R>() {
            if constexpr (R <= kPairedRows)
              group_avx512<R, 2>(xq, 0, w + g * stride, out, run * stride);
          });
          write(out, g);
          write(out + m * kGroupRows, g + run);
        },
        [&](int64_t i) {
          alignas(64) float out[kPairedRows * kGroupRows];
          group_product(level, xq, 0, m, w + (first + i) * stride, out);
          write(out, first + i);
        });
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t g = first; g < last; ++g) {
    alignas(64) float out[kMaxChunkRows * kGroupRows];
    const auto [lane0, lane1] = lanes(g);
    for (int64_t r0 = 0; r0 < m; r0 += kMaxChunkRows) {
      const int64_t rows = std::min(kMaxChunkRows, m - r0);
      group_product(level, xq, r0, rows, w + g * stride, out);
      write_rows(out, r0, rows, g, lane0, lane1, row0, n, bias, y);
    }
  }
}

}  // namespace strata::cpu
