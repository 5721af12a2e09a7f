#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include "kernels/cpu/skinny_gemm.h"

namespace strata::cpu {

namespace {

// Decode-shaped products (a few rows against a large weight) are bound by streaming the
// weight from memory. OpenBLAS's sgemm with 1-8 rows streams it at a fraction of the
// bandwidth (measured in docs/benchmarks.md: ~4x slower than its own sgemv for one row), so
// these shapes take a kernel that reads each weight row once for all the input rows.
constexpr int64_t kMaxSkinnyRows = 8;

void skinny_dispatch(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y) {
  skinny::with_rows(m, [&]<int R>() { skinny::avx2<R>(x, k, w, n, y); });
}

}  // namespace

void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y) {
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias ? bias[j] : 0.0f;
  if (m <= kMaxSkinnyRows && skinny::has_avx2_fma()) {
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
