#include "core/tensor.h"

#include <cstring>
#include <numeric>

#include "core/error.h"

namespace strata {

static int64_t product(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

Tensor::Tensor(std::vector<int64_t> shape) : shape_(std::move(shape)) {
  const int64_t n = product(shape_);
  STRATA_CHECK(n >= 0, "negative shape {}", shape_str());
  auto storage = std::shared_ptr<float[]>(new float[std::max<int64_t>(n, 1)]());
  data_ = storage.get();
  owner_ = storage;
}

Tensor Tensor::view(float* data, std::vector<int64_t> shape, std::shared_ptr<void> owner) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.owner_ = std::move(owner);
  return t;
}

int64_t Tensor::numel() const {
  return product(shape_);
}

std::string Tensor::shape_str() const {
  return shape_to_string(shape_);
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  STRATA_CHECK(product(shape) == numel(), "reshape {} -> {}", shape_str(), shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_);
  if (numel() > 0) std::memcpy(t.data_, data_, numel() * sizeof(float));
  return t;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace strata
