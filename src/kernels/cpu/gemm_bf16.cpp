// cpu::linear_bf16 (gemm.h): bf16 weights, f32 activations and sums. A bf16 value is the upper
// half of an f32, so widening is a 16-bit shift: decode reads half the bytes of the f32 path
// and does the same FMAs.
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/skinny_gemm.h"

namespace strata::cpu {

namespace {

constexpr int64_t kMaxSkinnyRows = 8;

bool has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// y[r, j] += x[r, :] . w[j, :] for R rows, 16 weights a step; weight rows over the threads.
// (GCC 12 warns inside its own AVX-512 intrinsics, whose masked forms start from undefined
// registers: a known false positive, silenced for this kernel only.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <int R>
__attribute__((target("avx512f"))) void skinny_avx512(const float* x, int64_t k, const uint16_t* w,
                                                      int64_t n, float* y) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* wj = w + j * k;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      const __m512i wide =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wj + i)));
      const __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + r * k + i), acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      float v = _mm512_reduce_add_ps(acc[r]);
      for (int64_t t = i; t < k; ++t) v += bf16_to_f32(wj[t]) * x[r * k + t];
      y[r * n + j] += v;
    }
  }
}

#pragma GCC diagnostic pop

void decode_rows(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y,
                 Simd simd) {
  skinny::with_rows(m, [&]<int R>() {
    if ((simd == Simd::Best || simd == Simd::Avx512) && has_avx512())
      return skinny_avx512<R>(x, k, w, n, y);
    if (simd != Simd::Portable && skinny::has_avx2_fma()) return skinny::avx2<R>(x, k, w, n, y);
    skinny::portable(x, R, k, w, n, y);
  });
}

}  // namespace

void linear_bf16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                 const float* bias, float* y, Simd simd) {
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias ? bias[j] : 0.0f;
  if (m <= kMaxSkinnyRows) return decode_rows(x, m, k, w, n, y, simd);
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
