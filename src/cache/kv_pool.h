#pragma once
// KVPool: the key/value cache of the attention layers one process owns. It is addressed by
// global layer id and answers only for ids it holds; any other id is a loud error naming the
// id and the ids it does hold (DESIGN.md §1.1: under pipeline parallelism or in a hybrid model,
// "layer 0" may not be ours). Slots are rows; slot 0 is the dummy target for padding.
#include <map>
#include <memory>
#include <vector>

#include "cache/kv_layout.h"

namespace strata {

class KVPool {
 public:
  // `layers`: global layer id -> layout. `num_slots` rows per layer (slot 0 included).
  KVPool(std::map<int, KVLayerLayout> layers, int64_t num_slots);

  bool holds(int layer_id) const { return index_.count(layer_id) > 0; }
  std::vector<int> layer_ids() const;
  int64_t num_slots() const { return num_slots_; }
  const KVLayerLayout& layout(int layer_id) const;
  float* k_buffer(int layer_id);
  // For v_in_k layouts this is the key buffer (value = leading columns of each row).
  float* v_buffer(int layer_id);
  // Writes rows for `n` new tokens at `slots`. `v` is ignored for v_in_k layouts.
  void store(int layer_id, const int32_t* slots, int n, const float* k, const float* v);
  size_t bytes() const;

 private:
  struct LayerBuffers {
    KVLayerLayout layout;
    std::vector<float> k, v;
  };
  LayerBuffers& at(int layer_id);
  const LayerBuffers& at(int layer_id) const;
  int64_t num_slots_;
  std::map<int, int> index_;  // global layer id -> local index
  std::vector<LayerBuffers> layers_;
};

}  // namespace strata
