#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

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

int sgemm_parts(int64_t m, int64_t n, int64_t k) {
  if (omp_in_parallel()) return 1;
  // A block below ~1 MFLOP would cost more to hand out than to compute.
  const int64_t by_work = std::max<int64_t>(1, m * n * k / (int64_t{1} << 20));
  const int64_t by_columns = std::max<int64_t>(1, n / kSgemmBlockColumns);
  return static_cast<int>(std::min<int64_t>({omp_get_max_threads(), by_work, by_columns}));
}

void sgemm_columns(bool transposed_w, int64_t m, int64_t n, int64_t k, const float* x,
                   const float* w, int64_t ldw, float beta, float* y) {
  const int parts = sgemm_parts(m, n, k);
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
  for (int p = 0; p < parts; ++p) {
    // Block boundaries on multiples of 16 columns (whole vectors for OpenBLAS's kernels).
    const int64_t n0 = n * p / parts / 16 * 16;
    const int64_t n1 = p + 1 == parts ? n : n * (p + 1) / parts / 16 * 16;
    if (n1 <= n0) continue;
    const float* block = transposed_w ? w + n0 * ldw : w + n0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed_w ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n1 - n0), static_cast<int>(k), 1.0f, x,
                static_cast<int>(k), block, static_cast<int>(ldw), beta, y + n0,
                static_cast<int>(n));
  }
}

void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y) {
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias ? bias[j] : 0.0f;
  if (m <= kMaxSkinnyRows && skinny::has_avx2_fma()) {
    skinny_dispatch(x, m, k, w, n, y);
    return;
  }
  sgemm_columns(true, m, n, k, x, w, k, 1.0f, y);
}

void matmul(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y) {
  if (m == 0 || n == 0) return;
  sgemm_columns(false, m, n, k, x, w, n, 0.0f, y);
}

void set_num_threads(int n) {
  // OpenBLAS computes on the calling thread only: sgemm_columns hands it the OpenMP threads.
  openblas_set_num_threads(1);
  omp_set_num_threads(n);
}

}  // namespace strata::cpu
