// cpu::linear_bf16 (gemm.h): bf16 weights and inputs, f32 sums. CPUs with AVX512_BF16 multiply
// bf16 pairs directly (`vdpbf16ps`, every row count through one kernel: gemm_bf16_dot.cpp;
// prefill shapes on AMX-BF16 tiles where the CPU has them: amx.h). The others round the inputs
// to bf16 values held as f32 and widen the weights (a bf16 value is the upper half of an f32: a
// 16-bit shift) for the FMA kernels below or, past 8 rows, for OpenBLAS's sgemm: every level
// computes the same products, summed in its own order.
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/cpu/skinny_gemm.h"

namespace strata::cpu {

namespace {

constexpr int64_t kMaxSkinnyRows = 8;

// y[r, j] += x[r, :] . w[j, :] for R rows against J weight rows j0.., 16 weights a step, one
// accumulator per output as in skinny::rows_avx2 (the same order for every R and J: a row's
// result does not depend on its batch; J > 1 gives narrow batches independent FMA chains).
// (GCC 12 warns inside its own AVX-512 intrinsics, whose masked forms start from undefined
// registers: a known false positive, silenced for this kernel only.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int R, int J>
__attribute__((target("avx512f"))) inline void rows_avx512(const float* x, int64_t k,
                                                           const uint16_t* w, int64_t j0, int64_t n,
                                                           float* y) {
  __m512 acc[J][R];
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) acc[jj][r] = _mm512_setzero_ps();
  const uint16_t* wj = w + j0 * k;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int jj = 0; jj < J; ++jj) {
      const __m512i wide = _mm512_cvtepu16_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wj + jj * k + i)));
      const __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
      for (int r = 0; r < R; ++r)
        acc[jj][r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + r * k + i), acc[jj][r]);
    }
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) {
      float v = _mm512_reduce_add_ps(acc[jj][r]);
      for (int64_t t = i; t < k; ++t) v += bf16_to_f32(wj[jj * k + t]) * x[r * k + t];
      y[r * n + j0 + jj] += v;
    }
}

template <int R>
__attribute__((target("avx512f"))) void skinny_avx512(const float* x, int64_t k, const uint16_t* w,
                                                      int64_t n, float* y) {
  constexpr int J = R <= 2 ? 4 : R <= 4 ? 2 : 1;  // J * R <= 8 chains
  const int64_t blocks = n / J;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) rows_avx512<R, J>(x, k, w, b * J, n, y);
  for (int64_t j = blocks * J; j < n; ++j) rows_avx512<R, 1>(x, k, w, j, n, y);
}

#pragma GCC diagnostic pop

// AVX2: 16 bf16 weights are one 256-bit load, each 32-bit lane two weights, the even one in its
// low half and the odd one in its high half. A shift makes the even ones f32 and a mask the odd
// ones: two plain integer operations per 16 weights, where widening 8 at a time took a shuffle
// and a shift per 8 (the shuffle port held one Zen core to ~10 GB/s of weights). `xs` is x with
// each whole chunk of 16 columns reordered to match, even columns first; the tail past the last
// whole chunk is read from x. One accumulator per output, as everywhere (batch-invariant).
template <int R, int J>
__attribute__((target("avx2,fma"))) inline void rows_avx2(const float* xs, const float* x,
                                                          int64_t k, const uint16_t* w, int64_t j0,
                                                          int64_t n, float* y) {
  const __m256i high_halves = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 acc[J][R];
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) acc[jj][r] = _mm256_setzero_ps();
  const uint16_t* wj = w + j0 * k;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int jj = 0; jj < J; ++jj) {
      const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wj + jj * k + i));
      const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
      const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, high_halves));
      for (int r = 0; r < R; ++r) {
        acc[jj][r] = _mm256_fmadd_ps(even, _mm256_loadu_ps(xs + r * k + i), acc[jj][r]);
        acc[jj][r] = _mm256_fmadd_ps(odd, _mm256_loadu_ps(xs + r * k + i + 8), acc[jj][r]);
      }
    }
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) {
      __m128 s =
          _mm_add_ps(_mm256_castps256_ps128(acc[jj][r]), _mm256_extractf128_ps(acc[jj][r], 1));
      s = _mm_hadd_ps(s, s);
      s = _mm_hadd_ps(s, s);
      float v = _mm_cvtss_f32(s);
      for (int64_t t = i; t < k; ++t) v += bf16_to_f32(wj[jj * k + t]) * x[r * k + t];
      y[r * n + j0 + jj] += v;
    }
}

template <int R>
void skinny_avx2(const float* x, int64_t k, const uint16_t* w, int64_t n, float* y) {
  // Reordered once per call on the calling thread (R * k floats: a few KiB).
  thread_local std::vector<float> split;
  split.assign(x, x + R * k);
  for (int r = 0; r < R; ++r)
    for (int64_t i = 0; i + 16 <= k; i += 16)
      for (int t = 0; t < 8; ++t) {
        split[r * k + i + t] = x[r * k + i + 2 * t];
        split[r * k + i + 8 + t] = x[r * k + i + 2 * t + 1];
      }
  const float* xs = split.data();
  constexpr int J = R == 1 ? 4 : R == 2 ? 2 : 1;  // J * R <= 8 of the 16 registers
  const int64_t blocks = n / J;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) rows_avx2<R, J>(xs, x, k, w, b * J, n, y);
  for (int64_t j = blocks * J; j < n; ++j) rows_avx2<R, 1>(xs, x, k, w, j, n, y);
}

enum class Level { Dot, Avx512, Avx2, Portable };

// The instruction set `simd` asks for, or the best below it that this CPU has.
Level resolve(Simd simd) {
  const bool above_avx512 = simd == Simd::Best || simd == Simd::Amx || simd == Simd::Avx512Bf16;
  if (above_avx512 && bf16_dot::available()) return Level::Dot;
  if ((above_avx512 || simd == Simd::Avx512) && skinny::has_avx512()) return Level::Avx512;
  if (simd != Simd::Portable && skinny::has_avx2_fma()) return Level::Avx2;
  return Level::Portable;
}

void decode_rows(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y,
                 Level level) {
  skinny::with_rows(m, [&]<int R>() {
    if (level == Level::Avx512) return skinny_avx512<R>(x, k, w, n, y);
    if (level == Level::Avx2) return skinny_avx2<R>(x, k, w, n, y);
    skinny::portable(x, R, k, w, n, y);
  });
}

}  // namespace

void linear_bf16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                 const float* bias, float* y, Simd simd) {
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias ? bias[j] : 0.0f;
  const Level level = resolve(simd);
  if (level == Level::Dot) {
    // AMX-BF16 tiles for prefill shapes where the CPU has them (and `simd` allows them): their
    // rows agree with the vdpbf16ps kernel's to f32 rounding, not bit for bit (amx.h).
    if (m > kMaxSkinnyRows && (simd == Simd::Best || simd == Simd::Amx) && amx::has_bf16())
      return amx::linear_bf16(x, m, k, w, n, y);
    return bf16_dot::linear(x, m, k, w, n, y);
  }
  // The inputs as bf16 values (kept between calls, as the dot kernel keeps its copy).
  thread_local std::vector<float> rounded;
  rounded.resize(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m * k; ++i) rounded[i] = bf16_to_f32(f32_to_bf16(x[i]));
  x = rounded.data();
  if (m <= kMaxSkinnyRows) return decode_rows(x, m, k, w, n, y, level);
  // Prefill: panels of weight rows widened to f32 (about 4 MiB each, so a panel is still in
  // cache when sgemm reads it), each multiplied by all of x; the OpenMP threads take panels in
  // turn, each widening its own and running sgemm on it single-threaded (one thread pool:
  // kernels/cpu/gemm.h).
  const int64_t panel = std::clamp<int64_t>((int64_t{1} << 20) / std::max<int64_t>(k, 1), 16, n);
  const int64_t panels = (n + panel - 1) / panel;
  const int parts = static_cast<int>(std::min<int64_t>(sgemm_parts(m, n, k), panels));
#pragma omp parallel num_threads(parts) if (parts > 1)
  {
    std::vector<float> wide(static_cast<size_t>(panel * k));
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * panel, rows = std::min(panel, n - j0);
      const uint16_t* src = w + j0 * k;
      for (int64_t i = 0; i < rows * k; ++i) wide[i] = bf16_to_f32(src[i]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                  static_cast<int>(rows), static_cast<int>(k), 1.0f, x, static_cast<int>(k),
                  wide.data(), static_cast<int>(k), 1.0f, y + j0, static_cast<int>(n));
    }
  }
}

}  // namespace strata::cpu
