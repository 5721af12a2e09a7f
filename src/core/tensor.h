#pragma once
// Tensor: a row-major array that knows its element type and where it lives (host memory or
// one GPU's), owning its storage or viewing someone else's (a memory-mapped checkpoint, a pool
// buffer, a workspace arena). A tensor is seen as rows x cols (cols = the last dimension) with
// a row stride, so that a column slice of one buffer (q, k and v of a fused projection) is a
// view, not a copy. Host f32 tensors are what the CPU reference computes with; `data()` and
// `row()` are their accessors and refuse anything else.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace strata {

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled host f32 tensor of the given shape.
  explicit Tensor(std::vector<int64_t> shape);
  // A zero-filled host tensor of any dtype.
  Tensor(std::vector<int64_t> shape, DType dtype);
  // A view of host f32 memory kept alive by `owner` (may be null when the caller guarantees
  // lifetime).
  static Tensor view(float* data, std::vector<int64_t> shape, std::shared_ptr<void> owner = {});
  // A view of memory of any dtype on any device; `row_stride` 0 means contiguous.
  static Tensor view(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                     std::shared_ptr<void> owner = {}, int64_t row_stride = 0);

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool on_host() const { return device_.is_host(); }

  // Host f32 only (checked): the CPU reference's accessors.
  float* data();
  const float* data() const;
  float* row(int64_t i) { return data() + i * row_step(); }
  const float* row(int64_t i) const { return data() + i * row_step(); }
  // Any dtype, any device: the start of the first row.
  void* raw() const { return data_; }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data_);
  }

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  bool empty() const { return data_ == nullptr; }
  // Elements per index of dim 0 (a contiguous tensor's row(i) step).
  int64_t row_size() const { return shape_.empty() ? 1 : numel() / shape_[0]; }
  // The rows x cols view: cols is the last dimension, rows everything before it.
  int64_t cols() const { return shape_.empty() ? 1 : shape_.back(); }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
  // Elements between the starts of consecutive rows of the rows x cols view.
  int64_t row_stride() const { return row_stride_ > 0 ? row_stride_ : cols(); }
  bool contiguous() const { return row_stride() == cols(); }
  size_t bytes() const { return storage_bytes(dtype_, rows(), cols()); }
  std::string shape_str() const;
  std::string describe() const;  // "bf16[4, 128] on cuda:0"

  // Columns [start, start + width) of every row: a view sharing the storage.
  Tensor slice_cols(int64_t start, int64_t width) const;
  // Rows [start, start + count) along dim 0: a view sharing the storage.
  Tensor slice_rows(int64_t start, int64_t count) const;
  // Same storage, new shape with the same element count (contiguous tensors; a strided one
  // may change only its leading dimensions).
  Tensor reshaped(std::vector<int64_t> shape) const;
  // What keeps the storage alive (for views of part of it).
  const std::shared_ptr<void>& owner() const { return owner_; }
  // A contiguous host copy (host tensors only).
  Tensor clone() const;

 private:
  int64_t row_step() const;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  Device device_;
  int64_t row_stride_ = 0;  // 0: contiguous
  std::shared_ptr<void> owner_;
};

std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace strata
