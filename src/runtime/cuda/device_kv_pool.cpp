#include "runtime/cuda/device_kv_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace strata {

DeviceKVPool::DeviceKVPool(std::map<int, KVLayerLayout> layers, int64_t num_slots)
    : num_slots_(num_slots) {
  STRATA_CHECK(num_slots >= 2, "a KV pool needs the dummy slot plus at least one, got {}",
               num_slots);
  for (auto& [id, layout] : layers) {
    STRATA_CHECK(layout.num_kv_heads > 0 && layout.k_head_dim > 0 && layout.v_head_dim > 0,
                 "layer {} layout {}", id, layout.describe());
    index_[id] = static_cast<int>(layers_.size());
    LayerBuffers b;
    b.layout = layout;
    const size_t k_bytes = static_cast<size_t>(num_slots) * layout.k_width() * sizeof(cuda::bf16);
    b.k.ensure(k_bytes);
    // Zeroed: padding tokens point at slot 0 and a never-written row must not hold NaNs.
    STRATA_CUDA_CHECK(cudaMemset(b.k.data(), 0, k_bytes));
    if (!layout.v_in_k) {
      const size_t v_bytes = static_cast<size_t>(num_slots) * layout.v_width() * sizeof(cuda::bf16);
      b.v.ensure(v_bytes);
      STRATA_CUDA_CHECK(cudaMemset(b.v.data(), 0, v_bytes));
    }
    layers_.push_back(std::move(b));
  }
}

size_t DeviceKVPool::bytes_per_slot(const std::map<int, KVLayerLayout>& layers) {
  size_t n = 0;
  for (const auto& [_, l] : layers)
    n += (l.k_width() + (l.v_in_k ? 0 : l.v_width())) * sizeof(cuda::bf16);
  return n;
}

std::vector<int> DeviceKVPool::layer_ids() const {
  std::vector<int> ids;
  for (const auto& [id, _] : index_) ids.push_back(id);
  return ids;
}

const DeviceKVPool::LayerBuffers& DeviceKVPool::at(int layer_id) const {
  auto it = index_.find(layer_id);
  if (it == index_.end())
    throw Error(fmt::format(
        "device KV pool has no buffer for layer {}: it holds layers [{}]. The caller asked for a "
        "layer "
        "this process does not own or that has no KV cache (a recurrent layer, or another "
        "pipeline stage's layer).",
        layer_id, fmt::join(layer_ids(), ", ")));
  return layers_[it->second];
}

const KVLayerLayout& DeviceKVPool::layout(int layer_id) const {
  return at(layer_id).layout;
}

cuda::bf16* DeviceKVPool::k_buffer(int layer_id) const {
  return at(layer_id).k.as<cuda::bf16>();
}

cuda::bf16* DeviceKVPool::v_buffer(int layer_id) const {
  const auto& b = at(layer_id);
  return b.layout.v_in_k ? b.k.as<cuda::bf16>() : b.v.as<cuda::bf16>();
}

cuda::DeviceKV DeviceKVPool::view(int layer_id) const {
  const KVLayerLayout& l = layout(layer_id);
  cuda::DeviceKV kv;
  kv.k = k_buffer(layer_id);
  kv.v = v_buffer(layer_id);
  kv.k_row_stride = l.k_width();
  kv.v_row_stride = l.v_row_stride();
  kv.num_kv_heads = l.num_kv_heads;
  kv.k_head_dim = l.k_head_dim;
  kv.v_head_dim = l.v_head_dim;
  return kv;
}

size_t DeviceKVPool::bytes() const {
  return bytes_per_slot([this] {
           std::map<int, KVLayerLayout> m;
           for (const auto& [id, i] : index_) m[id] = layers_[i].layout;
           return m;
         }()) *
         num_slots_;
}

}  // namespace strata
