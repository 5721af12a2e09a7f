#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

namespace strata::cpu {

namespace {

// Decode-shaped products (a few rows against a large weight) are bound by streaming the
// weight from memory. OpenBLAS's sgemm with 1-8 rows streams it at a fraction of the
// bandwidth (measured in docs/benchmarks.md: ~4x slower than its own sgemv for one row), so
// these shapes take a kernel that reads each weight row once for all the input rows.
constexpr int64_t kMaxSkinnyRows = 8;

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// y[r, j] = x[r, :] . w[j, :] for R rows; weight rows split across the OpenMP threads.
template <int R>
__attribute__((target("avx2,fma"))) void skinny_linear(const float* x, int64_t k, const float* w,
                                                       int64_t n, float* y) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    const float* wj = w + j * k;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
      const __m256 wv = _mm256_loadu_ps(wj + i);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k + i), acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
      s = _mm_hadd_ps(s, s);
      s = _mm_hadd_ps(s, s);
      float v = _mm_cvtss_f32(s);
      for (int64_t t = i; t < k; ++t) v += wj[t] * x[r * k + t];
      y[r * n + j] += v;
    }
  }
}

void skinny_dispatch(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y) {
  switch (m) {
    case 1:
      return skinny_linear<1>(x, k, w, n, y);
    case 2:
      return skinny_linear<2>(x, k, w, n, y);
    case 3:
      return skinny_linear<3>(x, k, w, n, y);
    case 4:
      return skinny_linear<4>(x, k, w, n, y);
    case 5:
      return skinny_linear<5>(x, k, w, n, y);
    case 6:
      return skinny_linear<6>(x, k, w, n, y);
    case 7:
      return skinny_linear<7>(x, k, w, n, y);
    default:
      return skinny_linear<8>(x, k, w, n, y);
  }
}

}  // namespace

void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y) {
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias ? bias[j] : 0.0f;
  if (m <= kMaxSkinnyRows && cpu_has_avx2_fma()) {
    skinny_dispatch(x, m, k, w, n, y);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k), 1.0f, y,
              static_cast<int>(n));
}

void matmul(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(n), 0.0f, y,
              static_cast<int>(n));
}

void set_num_threads(int n) {
  openblas_set_num_threads(n);
  omp_set_num_threads(n);
}

}  // namespace strata::cpu
