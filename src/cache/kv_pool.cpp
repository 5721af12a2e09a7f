#include "cache/kv_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "core/error.h"

namespace strata {

std::string KVLayerLayout::describe() const {
  return fmt::format("{} kv heads, k {} wide, v {} wide{}", num_kv_heads, k_head_dim, v_head_dim,
                     v_in_k ? " (inside k)" : "");
}

KVPool::KVPool(std::map<int, KVLayerLayout> layers, int64_t num_slots) : num_slots_(num_slots) {
  STRATA_CHECK(num_slots >= 2, "a KV pool needs the dummy slot plus at least one, got {}",
               num_slots);
  for (auto& [id, layout] : layers) {
    STRATA_CHECK(layout.num_kv_heads > 0 && layout.k_head_dim > 0 && layout.v_head_dim > 0,
                 "layer {} layout {}", id, layout.describe());
    STRATA_CHECK(!layout.v_in_k || layout.v_head_dim <= layout.k_head_dim, "layer {}", id);
    index_[id] = static_cast<int>(layers_.size());
    LayerBuffers b;
    b.layout = layout;
    b.k.assign(static_cast<size_t>(num_slots) * layout.k_width(), 0.0f);
    if (!layout.v_in_k) b.v.assign(static_cast<size_t>(num_slots) * layout.v_width(), 0.0f);
    layers_.push_back(std::move(b));
  }
}

std::vector<int> KVPool::layer_ids() const {
  std::vector<int> ids;
  for (const auto& [id, _] : index_) ids.push_back(id);
  return ids;
}

const KVPool::LayerBuffers& KVPool::at(int layer_id) const {
  auto it = index_.find(layer_id);
  if (it == index_.end())
    throw Error(fmt::format(
        "KV pool has no buffer for layer {}: it holds layers [{}]. The caller asked for a layer "
        "this process does not own or that has no KV cache (a recurrent layer, or another "
        "pipeline stage's layer).",
        layer_id, fmt::join(layer_ids(), ", ")));
  return layers_[it->second];
}

KVPool::LayerBuffers& KVPool::at(int layer_id) {
  return const_cast<LayerBuffers&>(static_cast<const KVPool*>(this)->at(layer_id));
}

const KVLayerLayout& KVPool::layout(int layer_id) const {
  return at(layer_id).layout;
}

float* KVPool::k_buffer(int layer_id) {
  return at(layer_id).k.data();
}

float* KVPool::v_buffer(int layer_id) {
  auto& b = at(layer_id);
  return b.layout.v_in_k ? b.k.data() : b.v.data();
}

void KVPool::store(int layer_id, const int32_t* slots, int n, const float* k, const float* v) {
  auto& b = at(layer_id);
  const int kw = b.layout.k_width(), vw = b.layout.v_width();
  for (int i = 0; i < n; ++i) {
    STRATA_CHECK(slots[i] > 0 && slots[i] < num_slots_, "slot {} outside the pool of {}", slots[i],
                 num_slots_);
    std::memcpy(b.k.data() + static_cast<size_t>(slots[i]) * kw, k + static_cast<size_t>(i) * kw,
                kw * sizeof(float));
    if (!b.layout.v_in_k)
      std::memcpy(b.v.data() + static_cast<size_t>(slots[i]) * vw, v + static_cast<size_t>(i) * vw,
                  vw * sizeof(float));
  }
}

size_t KVPool::bytes() const {
  size_t n = 0;
  for (const auto& b : layers_) n += (b.k.size() + b.v.size()) * sizeof(float);
  return n;
}

}  // namespace strata
