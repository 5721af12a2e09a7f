#pragma once
// KVPool: the key/value cache of the attention layers one process owns, in the memory of the
// stage's device (host memory through CpuOps, GPU memory through CudaOps), each layer's rows
// in its layout's dtype. It is addressed by global layer id and answers only for ids it holds;
// any other id is a loud error naming the id and the ids it does hold (DESIGN.md §1.1: under
// pipeline parallelism or in a hybrid model, "layer 0" may not be ours). Slots are rows; slot
// 0 is the dummy target for padding. Backends size everything from layout() (§1.2).
#include <map>
#include <vector>

#include "cache/kv_layout.h"
#include "core/tensor.h"

namespace strata {

class Ops;

class KVPool {
 public:
  // `layers`: global layer id -> layout. `num_slots` rows per layer (slot 0 included),
  // zero-filled (padding tokens point at slot 0; a never-written row must not hold NaNs),
  // allocated through `ops` (persistent, outside every pass's workspace). With
  // `window_slots` > 0, sliding-window layers get that many rows instead: their slots are
  // TokenMemory's window space.
  KVPool(std::map<int, KVLayerLayout> layers, int64_t num_slots, Ops& ops,
         int64_t window_slots = 0);
  // Bytes one token slot takes over all of `layers`.
  static size_t bytes_per_slot(const std::map<int, KVLayerLayout>& layers);
  // `layers` split by slot space: the sliding-window ones (when `window` is true) or the
  // others; with a window space the two are sized separately.
  static std::map<int, KVLayerLayout> in_space(const std::map<int, KVLayerLayout>& layers,
                                               bool window);

  bool holds(int layer_id) const { return index_.count(layer_id) > 0; }
  std::vector<int> layer_ids() const;
  int64_t num_slots() const { return num_slots_; }
  // Whether the layer's rows are window slots (TokenMemory::window_table()) rather than full
  // ones (req_to_token()).
  bool in_window_space(int layer_id) const;
  int64_t window_slots() const { return window_slots_; }
  const KVLayerLayout& layout(int layer_id) const;
  // [num_slots, k_width] rows of the layout's dtype, on the pool's device.
  const Tensor& k_buffer(int layer_id) const;
  // [num_slots, v_width]; for v_in_k layouts the key buffer (value = leading columns of a row).
  const Tensor& v_buffer(int layer_id) const;
  // Host pools: writes rows for `n` new tokens at `slots` (f32). `v` is ignored for v_in_k
  // layouts. Device pools are written by their attention backend's kernels.
  void store(int layer_id, const int32_t* slots, int n, const float* k, const float* v);
  size_t bytes() const;

 private:
  struct LayerBuffers {
    KVLayerLayout layout;
    Tensor k, v;
  };
  const LayerBuffers& at(int layer_id) const;
  int64_t num_slots_, window_slots_;
  std::map<int, int> index_;  // global layer id -> local index
  std::vector<LayerBuffers> layers_;
};

}  // namespace strata
