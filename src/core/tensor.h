#pragma once
// Tensor: a contiguous row-major f32 array on the host, owning its storage or viewing
// someone else's (a memory-mapped checkpoint, a pool buffer). CPU compute is f32 throughout:
// the CPU path is the reference every other backend is checked against.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata {

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor of the given shape.
  explicit Tensor(std::vector<int64_t> shape);
  // A view of memory kept alive by `owner` (may be null when the caller guarantees lifetime).
  static Tensor view(float* data, std::vector<int64_t> shape, std::shared_ptr<void> owner = {});

  float* data() { return data_; }
  const float* data() const { return data_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  bool empty() const { return data_ == nullptr; }
  float* row(int64_t i) { return data_ + i * row_size(); }
  const float* row(int64_t i) const { return data_ + i * row_size(); }
  int64_t row_size() const { return shape_.empty() ? 1 : numel() / shape_[0]; }
  std::string shape_str() const;

  // Same storage, new shape with the same element count.
  Tensor reshaped(std::vector<int64_t> shape) const;
  Tensor clone() const;

 private:
  std::vector<int64_t> shape_;
  float* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace strata
