#include <fmt/format.h>

#include <chrono>
#include <thread>

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

int current_device() {
  int device = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  return device;
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

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool wait_event(cudaEvent_t event, double timeout_s, const std::function<void()>& poll) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Spin first (a pipeline hand-over or a decode step is usually microseconds away), then
  // yield, then sleep: a waiting stage leaves the CPU to the stages that work.
  for (int polls = 0;; ++polls) {
    const cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess) return true;
    if (err != cudaErrorNotReady) STRATA_CUDA_CHECK(err);
    if (poll) poll();
    if (timeout_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() > timeout_s)
      return false;
    if (polls < 256) continue;
    if (polls < 4096)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
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

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

void PinnedBuffer::ensure(size_t bytes) {
  if (bytes <= bytes_) return;
  if (ptr_) STRATA_CUDA_CHECK(cudaFreeHost(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
  STRATA_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  bytes_ = bytes;
}

}  // namespace strata::cuda
