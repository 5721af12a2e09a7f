#pragma once
// DeviceKVPool: the KV cache of the attention layers this process owns, in GPU memory
// (bf16). Like the host KVPool it is addressed by global layer id, answers only for ids it
// holds (a loud error naming the ids it does hold otherwise, DESIGN.md §1.1) and reports
// each layer's layout, from which the attention kernels size everything (§1.2).
#include <map>
#include <vector>

#include "cache/kv_layout.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"

namespace strata {

class DeviceKVPool {
 public:
  DeviceKVPool(std::map<int, KVLayerLayout> layers, int64_t num_slots);
  // Bytes one token slot takes over all of `layers`.
  static size_t bytes_per_slot(const std::map<int, KVLayerLayout>& layers);

  bool holds(int layer_id) const { return index_.count(layer_id) > 0; }
  std::vector<int> layer_ids() const;
  int64_t num_slots() const { return num_slots_; }
  const KVLayerLayout& layout(int layer_id) const;
  // Device pointers and strides of one layer's cache (mutable: the backend writes new rows).
  cuda::DeviceKV view(int layer_id) const;
  cuda::bf16* k_buffer(int layer_id) const;
  cuda::bf16* v_buffer(int layer_id) const;  // the key buffer when values live inside keys
  size_t bytes() const;

 private:
  struct LayerBuffers {
    KVLayerLayout layout;
    cuda::DeviceBuffer k, v;
  };
  const LayerBuffers& at(int layer_id) const;
  int64_t num_slots_;
  std::map<int, int> index_;  // global layer id -> local index
  std::vector<LayerBuffers> layers_;
};

}  // namespace strata
