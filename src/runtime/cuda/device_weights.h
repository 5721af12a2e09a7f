#pragma once
// Puts a model's parameters in GPU memory: matrices as bf16 (several projections of one
// input stacked into one matrix, as the host Linear::load_stacked does), vectors (norm
// weights, biases) as f32. From a checkpoint, each tensor is read through WeightSource, so
// names, shapes and errors are the host path's. With --load-format dummy, matrices are drawn
// on the device (uniform, std 0.02; not the host's normal draw) and vectors come from the
// host's dummy rule (norms 1, biases 0).
#include <string>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "model/weights.h"

namespace strata {

class DeviceWeights {
 public:
  DeviceWeights(WeightSource& source, bool dummy, uint64_t seed, cudaStream_t stream)
      : source_(source), dummy_(dummy), seed_(seed), stream_(stream) {}
  // `prefix.weight` of each name, [outs[i], in] each, stacked along rows.
  cuda::DeviceBuffer matrix(const std::vector<std::string>& prefixes, int64_t in,
                            const std::vector<int64_t>& outs);
  // A single tensor `name` of shape [rows, cols] (the embedding table).
  cuda::DeviceBuffer table(const std::string& name, int64_t rows, int64_t cols);
  // `name` [n] as f32.
  cuda::DeviceBuffer vector(const std::string& name, int64_t n);
  // Stacked biases `prefix.bias` (f32), or an empty buffer when `present` is false.
  cuda::DeviceBuffer biases(const std::vector<std::string>& prefixes,
                            const std::vector<int64_t>& outs, bool present);
  size_t bytes() const { return bytes_; }

 private:
  void fill(cuda::bf16* dst, const std::string& name, int64_t rows, int64_t cols);
  WeightSource& source_;
  bool dummy_;
  uint64_t seed_;
  cudaStream_t stream_;
  size_t bytes_ = 0;
};

}  // namespace strata
