#include "core/tensor.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

#include "core/error.h"

namespace strata {

namespace {
constexpr size_t kHugePageBytes = size_t{2} << 20;
}  // namespace

static int64_t product(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

Tensor::Tensor(std::vector<int64_t> shape) : Tensor(std::move(shape), DType::F32) {}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  const int64_t n = product(shape_);
  STRATA_CHECK(n >= 0, "negative shape {}", shape_str());
  const size_t bytes = std::max<size_t>(storage_bytes(dtype, rows(), cols()), 64);
  void* p = nullptr;
  if (bytes >= kHugePageBytes) {
    // Weight matrices and caches: in 2 MiB pages where the kernel grants them (transparent huge
    // pages on request, Linux's default "madvise" mode). A 4 KiB page costs a fault each on first
    // touch, 800 k of them for a 3 GiB model, which took most of a CPU model's load on the
    // project's VMs (perf: page faults under the zero fill, 55-65% of a dummy load); and a
    // decode step streams every weight once, crossing a 4 KiB page every 4 KiB.
    const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    p = std::aligned_alloc(kHugePageBytes, rounded);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it the pages are 4 KiB
#endif
    owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  } else {
    // 64-byte aligned so that vector kernels may use aligned loads on any row start.
    p = ::operator new[](bytes, std::align_val_t{64});
    owner_ =
        std::shared_ptr<void>(p, [](void* q) { ::operator delete[](q, std::align_val_t{64}); });
  }
  std::memset(p, 0, bytes);
  data_ = p;
}

Tensor Tensor::view(float* data, std::vector<int64_t> shape, std::shared_ptr<void> owner) {
  return view(data, std::move(shape), DType::F32, Device::host(), std::move(owner));
}

Tensor Tensor::view(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                    std::shared_ptr<void> owner, int64_t row_stride) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.dtype_ = dtype;
  t.device_ = device;
  t.owner_ = std::move(owner);
  t.row_stride_ = row_stride == t.cols() ? 0 : row_stride;
  return t;
}

float* Tensor::data() {
  STRATA_CHECK(data_ == nullptr || (dtype_ == DType::F32 && device_.is_host()),
               "host f32 access to a {} tensor", describe());
  return static_cast<float*>(data_);
}

const float* Tensor::data() const {
  return const_cast<Tensor*>(this)->data();
}

int64_t Tensor::row_step() const {
  if (contiguous()) return row_size();
  STRATA_CHECK(ndim() == 2, "row() of a strided {} tensor", describe());
  return row_stride_;
}

int64_t Tensor::numel() const {
  return product(shape_);
}

std::string Tensor::shape_str() const {
  return shape_to_string(shape_);
}

std::string Tensor::describe() const {
  return fmt::format("{}{} on {}", dtype_name(dtype_), shape_str(), device_.str());
}

Tensor Tensor::slice_cols(int64_t start, int64_t width) const {
  STRATA_CHECK(dtype_ != DType::Q8, "columns of a packed {} matrix", describe());
  STRATA_CHECK(start >= 0 && width >= 0 && start + width <= cols(), "columns [{}, {}) of {}", start,
               start + width, describe());
  std::vector<int64_t> shape = shape_;
  shape.back() = width;
  char* base = static_cast<char*>(data_) + start * dtype_size(dtype_);
  return view(base, std::move(shape), dtype_, device_, owner_, row_stride());
}

Tensor Tensor::slice_rows(int64_t start, int64_t count) const {
  STRATA_CHECK(ndim() >= 1 && start >= 0 && count >= 0 && start + count <= shape_[0],
               "rows [{}, {}) of {}", start, start + count, describe());
  // A packed matrix's rows are interleaved in groups: its kernels take a first row instead.
  STRATA_CHECK(dtype_ != DType::Q8, "rows of a packed {} matrix", describe());
  std::vector<int64_t> shape = shape_;
  shape[0] = count;
  const int64_t step = contiguous() ? row_size() : row_stride_;
  STRATA_CHECK(contiguous() || ndim() == 2, "row slice of a strided {} tensor", describe());
  char* base = static_cast<char*>(data_) + start * step * dtype_size(dtype_);
  return view(base, std::move(shape), dtype_, device_, owner_, row_stride());
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  STRATA_CHECK(product(shape) == numel(), "reshape {} -> {}", shape_str(), shape_to_string(shape));
  STRATA_CHECK(contiguous() || (!shape.empty() && shape.back() == cols()),
               "reshape of a strided {} tensor to {}", describe(), shape_to_string(shape));
  STRATA_CHECK(dtype_ != DType::Q8 || (!shape.empty() && shape.back() == cols()),
               "reshape of a packed {} matrix to {}", describe(), shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  STRATA_CHECK(on_host(), "clone() of a {} tensor: copy it through its device's ops", describe());
  Tensor t(shape_, dtype_);
  if (dtype_ == DType::Q8) {  // packed: always contiguous
    std::memcpy(t.data_, data_, bytes());
    return t;
  }
  const size_t row_bytes = static_cast<size_t>(cols()) * dtype_size(dtype_);
  for (int64_t r = 0; r < rows(); ++r)
    std::memcpy(static_cast<char*>(t.data_) + r * row_bytes,
                static_cast<const char*>(data_) + r * row_stride() * dtype_size(dtype_), row_bytes);
  return t;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace strata
