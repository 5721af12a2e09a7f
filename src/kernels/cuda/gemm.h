#pragma once
// bf16 GEMMs through cuBLAS with f32 accumulation, in the nn.Linear layout; and an f32 one for
// the small matrices kept in f32 (MoE routers, as the references compute them).
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

  // The general form: y[m, n] = x[m, k] . w[n, k]^T + beta * y with row strides (in
  // elements) ldx, ldw, ldy, so that column slices of a wider buffer are read and written in
  // place; y is f32 or bf16 (`y_bf16`), accumulation f32 either way.
  void gemm(const bf16* x, int64_t ldx, int64_t m, int64_t k, const bf16* w, int64_t ldw, int64_t n,
            void* y, bool y_bf16, int64_t ldy, float beta) const;
  // The same in f32 throughout (no TF32: CUBLAS_COMPUTE_32F), y f32.
  void gemm_f32(const float* x, int64_t ldx, int64_t m, int64_t k, const float* w, int64_t ldw,
                int64_t n, float* y, int64_t ldy, float beta) const;
  // `batch` independent GEMMs of the form above, operand b starting stride_x, stride_w and
  // stride_y elements after operand b - 1 (MLA's per-head absorbed projections).
  void gemm_batched(const bf16* x, int64_t ldx, int64_t stride_x, int64_t m, int64_t k,
                    const bf16* w, int64_t ldw, int64_t stride_w, int64_t n, void* y, bool y_bf16,
                    int64_t ldy, int64_t stride_y, int batch) const;

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // ours, so that CUDA graph capture never makes cuBLAS allocate
};

}  // namespace strata::cuda
