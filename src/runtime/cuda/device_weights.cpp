#include "runtime/cuda/device_weights.h"

#include <functional>

#include "core/dtype.h"

namespace strata {

void DeviceWeights::fill(cuda::bf16* dst, const std::string& name, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (dummy_) {
    cuda::fill_random(dst, n, seed_ ^ std::hash<std::string>{}(name), 0.02f, stream_);
    return;
  }
  const Tensor t = source_.load(name, {rows, cols});
  std::vector<uint16_t> bits(n);
  for (int64_t i = 0; i < n; ++i) bits[i] = f32_to_bf16(t.data()[i]);
  STRATA_CUDA_CHECK(cudaMemcpy(dst, bits.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice));
}

cuda::DeviceBuffer DeviceWeights::matrix(const std::vector<std::string>& prefixes, int64_t in,
                                         const std::vector<int64_t>& outs) {
  int64_t rows = 0;
  for (int64_t o : outs) rows += o;
  cuda::DeviceBuffer buf(static_cast<size_t>(rows * in) * sizeof(cuda::bf16));
  int64_t row = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    fill(buf.as<cuda::bf16>() + row * in, prefixes[i] + ".weight", outs[i], in);
    row += outs[i];
  }
  bytes_ += buf.bytes();
  return buf;
}

cuda::DeviceBuffer DeviceWeights::table(const std::string& name, int64_t rows, int64_t cols) {
  cuda::DeviceBuffer buf(static_cast<size_t>(rows * cols) * sizeof(cuda::bf16));
  fill(buf.as<cuda::bf16>(), name, rows, cols);
  bytes_ += buf.bytes();
  return buf;
}

cuda::DeviceBuffer DeviceWeights::vector(const std::string& name, int64_t n) {
  const Tensor t = source_.load(name, {n});
  std::vector<float> host(t.data(), t.data() + n);
  bytes_ += host.size() * sizeof(float);
  return cuda::to_device(host);
}

cuda::DeviceBuffer DeviceWeights::biases(const std::vector<std::string>& prefixes,
                                         const std::vector<int64_t>& outs, bool present) {
  if (!present) return {};
  std::vector<float> host;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor t = source_.load(prefixes[i] + ".bias", {outs[i]});
    host.insert(host.end(), t.data(), t.data() + outs[i]);
  }
  bytes_ += host.size() * sizeof(float);
  return cuda::to_device(host);
}

}  // namespace strata
