#include "kernels/cuda/gemm.h"

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace strata::cuda {

Blas::Blas(cudaStream_t stream) {
  STRATA_CUBLAS_CHECK(cublasCreate(&handle_));
  STRATA_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  STRATA_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  STRATA_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
}

Blas::~Blas() {
  if (handle_) cublasDestroy(handle_);
  if (workspace_) cudaFree(workspace_);
}

namespace {
int dim(int64_t v, const char* what) {
  STRATA_CHECK(v >= 0 && v <= INT32_MAX, "GEMM {} {} outside cuBLAS's int range", what, v);
  return static_cast<int>(v);
}
}  // namespace

void Blas::gemm(const bf16* x, int64_t ldx, int64_t m, int64_t k, const bf16* w, int64_t ldw,
                int64_t n, void* y, bool y_bf16, int64_t ldy, float beta) const {
  if (m == 0 || n == 0) return;
  const float alpha = 1.0f;
  // Column-major view as in linear(): y^T [n, m] = (w as [k, n])^T . (x as [k, m]).
  STRATA_CUBLAS_CHECK(cublasGemmEx(
      handle_, CUBLAS_OP_T, CUBLAS_OP_N, dim(n, "n"), dim(m, "m"), dim(k, "k"), &alpha, w,
      CUDA_R_16BF, dim(ldw, "ldw"), x, CUDA_R_16BF, dim(ldx, "ldx"), &beta, y,
      y_bf16 ? CUDA_R_16BF : CUDA_R_32F, dim(ldy, "ldy"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Blas::gemm_f32(const float* x, int64_t ldx, int64_t m, int64_t k, const float* w, int64_t ldw,
                    int64_t n, float* y, int64_t ldy, float beta) const {
  if (m == 0 || n == 0) return;
  const float alpha = 1.0f;
  STRATA_CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, dim(n, "n"), dim(m, "m"),
                                   dim(k, "k"), &alpha, w, CUDA_R_32F, dim(ldw, "ldw"), x,
                                   CUDA_R_32F, dim(ldx, "ldx"), &beta, y, CUDA_R_32F,
                                   dim(ldy, "ldy"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Blas::gemm_batched(const bf16* x, int64_t ldx, int64_t stride_x, int64_t m, int64_t k,
                        const bf16* w, int64_t ldw, int64_t stride_w, int64_t n, void* y,
                        bool y_bf16, int64_t ldy, int64_t stride_y, int batch) const {
  if (m == 0 || n == 0 || batch == 0) return;
  const float alpha = 1.0f, beta = 0.0f;
  STRATA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle_, CUBLAS_OP_T, CUBLAS_OP_N, dim(n, "n"), dim(m, "m"), dim(k, "k"), &alpha, w,
      CUDA_R_16BF, dim(ldw, "ldw"), stride_w, x, CUDA_R_16BF, dim(ldx, "ldx"), stride_x, &beta, y,
      y_bf16 ? CUDA_R_16BF : CUDA_R_32F, dim(ldy, "ldy"), stride_y, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace strata::cuda
