#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

namespace strata::cpu {

void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y) {
  if (m == 0 || n == 0) return;
  if (bias) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias[j];
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k),
              bias ? 1.0f : 0.0f, y, static_cast<int>(n));
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
