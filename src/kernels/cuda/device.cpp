#include <fmt/format.h>

#include "core/error.h"
#include "kernels/cuda/device_buffer.h"

namespace strata::cuda {

void cuda_failure(cudaError_t err, const char* call, const char* file, int line) {
  std::string hint;
  if (err == cudaErrorMemoryAllocation)
    hint =
        " (the GPU is out of memory: lower --mem-fraction-static, --max-total-tokens or the batch)";
  else if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
    hint = " (no usable GPU: run with --device cpu)";
  throw Error(fmt::format("CUDA error {} ({}) in {} at {}:{}{}", cudaGetErrorName(err),
                          cudaGetErrorString(err), call, file, line, hint));
}

void cublas_failure(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(fmt::format("cuBLAS error {} ({}) in {} at {}:{}", cublasGetStatusName(status),
                          cublasGetStatusString(status), call, file, line));
}

void throw_error(const std::string& message) {
  throw Error(message);
}

bool device_present(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later checks are not confused by it
    if (why) *why = fmt::format("no usable CUDA device ({})", cudaGetErrorString(err));
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

int sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&device));
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return count;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // no check: destructors must not throw
}

void DeviceBuffer::ensure(size_t bytes) {
  if (bytes <= bytes_) return;
  if (ptr_) STRATA_CUDA_CHECK(cudaFree(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
  STRATA_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
}

}  // namespace strata::cuda
