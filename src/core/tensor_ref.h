#pragma once
// TensorRef: a non-owning view of a contiguous row-major f32 tensor that says where its data
// lives: in host memory, or in the memory of the GPU this process drives. Pipeline stages
// hand their hidden states over as TensorRefs, so that a GPU stage gives a device transport
// (NCCL) its device buffer directly and a CPU stage gives MPI its host tensor.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace strata {

enum class Memory { Host, Device };

inline const char* to_string(Memory m) {
  return m == Memory::Host ? "host memory" : "GPU memory";
}

struct TensorRef {
  float* data = nullptr;
  std::vector<int64_t> shape;
  Memory memory = Memory::Host;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * sizeof(float); }
  static TensorRef host(Tensor& t) { return {t.data(), t.shape(), Memory::Host}; }
};

}  // namespace strata
