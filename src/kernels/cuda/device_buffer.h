#pragma once
// DeviceBuffer: one plain cudaMalloc allocation owned by RAII. Buffers that depend on the
// batch grow on demand (`ensure`) and never shrink, so steady-state decode allocates nothing.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace strata::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { ensure(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();

  // Makes the buffer at least `bytes` large; contents are lost when it grows.
  void ensure(size_t bytes);
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// PinnedBuffer: page-locked host memory (cudaMallocHost), grown on demand. Device-to-host
// copies into it are truly asynchronous; a copy into pageable memory blocks the calling thread
// until the stream reaches it, which a pipeline stage must never do unboundedly.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();
  void ensure(size_t bytes);  // contents are lost when it grows
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Host <-> device copies on the default stream, synchronous; for tests and weight loading.
template <typename T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer b(host.size() * sizeof(T));
  if (!host.empty())
    STRATA_CUDA_CHECK(
        cudaMemcpy(b.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return b;
}
template <typename T>
std::vector<T> to_host(const void* device, size_t count) {
  std::vector<T> out(count);
  if (count)
    STRATA_CUDA_CHECK(cudaMemcpy(out.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace strata::cuda
