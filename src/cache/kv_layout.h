#pragma once
// What a KV pool stores for one layer. Backends size every buffer from this report and
// never from the model config (DESIGN.md §1.2): with MLA the cached value is the
// kv_lora_rank-wide latent, not v_head_dim.
#include <cstddef>
#include <string>

#include "core/dtype.h"

namespace strata {

struct KVLayerLayout {
  int num_kv_heads = 0;
  int k_head_dim = 0;   // per-head width of a cached key row
  int v_head_dim = 0;   // per-head width of a cached value row
  bool v_in_k = false;  // value = first v_head_dim columns of the key row (MLA latent)
  // Of the cached rows: the stage device's (f32 on the CPU, bf16 on CUDA).
  DType dtype = DType::F32;
  // > 0: the layer attends to the last `sliding_window` positions only, so its rows may live
  // in the smaller window slot space (TokenMemory's WindowSpace).
  int sliding_window = 0;

  int k_width() const { return num_kv_heads * k_head_dim; }
  int v_width() const { return num_kv_heads * v_head_dim; }
  // Stride between consecutive slots' value rows, in floats.
  int v_row_stride() const { return v_in_k ? k_width() : v_width(); }
  // Bytes one token slot takes in this layer (key row, plus the value row unless inside it).
  size_t bytes_per_slot() const {
    return static_cast<size_t>(k_width() + (v_in_k ? 0 : v_width())) * dtype_size(dtype);
  }
  std::string describe() const;
};

// `layouts` with every layer's rows in `dtype` (a stage device stamps its own).
template <typename Map>
Map with_dtype(Map layouts, DType dtype) {
  for (auto& [_, l] : layouts) l.dtype = dtype;
  return layouts;
}

}  // namespace strata
