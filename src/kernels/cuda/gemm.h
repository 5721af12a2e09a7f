#pragma once
// bf16 GEMMs through cuBLAS with f32 accumulation, in the nn.Linear layout.
#include <cublas_v2.h>

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace strata::cuda {

class Blas {
 public:
  explicit Blas(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // y[m, n] = x[m, k] . w[n, k]^T + beta * y. `beta` 1 adds into y: the residual add of
  // o_proj and down_proj comes free with the GEMM.
  void linear(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, float* y,
              float beta = 0.0f) const;

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // ours, so that CUDA graph capture never makes cuBLAS allocate
};

}  // namespace strata::cuda
