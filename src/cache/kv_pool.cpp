#include "cache/kv_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "core/error.h"
#include "ops/ops.h"

namespace strata {

std::string KVLayerLayout::describe() const {
  return fmt::format("{} kv heads, k {} wide, v {} wide{}, {}", num_kv_heads, k_head_dim,
                     v_head_dim, v_in_k ? " (inside k)" : "", dtype_name(dtype));
}

KVPool::KVPool(std::map<int, KVLayerLayout> layers, int64_t num_slots, Ops& ops,
               int64_t window_slots)
    : num_slots_(num_slots), window_slots_(window_slots) {
  STRATA_CHECK(num_slots >= 2 && (window_slots == 0 || window_slots >= 2),
               "a KV pool needs the dummy slot plus at least one, got {} (window space {})",
               num_slots, window_slots);
  for (auto& [id, layout] : layers) {
    STRATA_CHECK(layout.num_kv_heads > 0 && layout.k_head_dim > 0 && layout.v_head_dim > 0,
                 "layer {} layout {}", id, layout.describe());
    STRATA_CHECK(!layout.v_in_k || layout.v_head_dim <= layout.k_head_dim, "layer {}", id);
    index_[id] = static_cast<int>(layers_.size());
    LayerBuffers b;
    b.layout = layout;
    const int64_t rows = window_slots > 0 && layout.sliding_window > 0 ? window_slots : num_slots;
    b.k = ops.allocate({rows, layout.k_width()}, layout.dtype);
    b.v = layout.v_in_k ? b.k : ops.allocate({rows, layout.v_width()}, layout.dtype);
    layers_.push_back(std::move(b));
  }
}

size_t KVPool::bytes_per_slot(const std::map<int, KVLayerLayout>& layers) {
  size_t n = 0;
  for (const auto& [_, l] : layers) n += l.bytes_per_slot();
  return n;
}

std::map<int, KVLayerLayout> KVPool::in_space(const std::map<int, KVLayerLayout>& layers,
                                              bool window) {
  std::map<int, KVLayerLayout> out;
  for (const auto& [id, l] : layers)
    if ((l.sliding_window > 0) == window) out.emplace(id, l);
  return out;
}

bool KVPool::in_window_space(int layer_id) const {
  return window_slots_ > 0 && at(layer_id).layout.sliding_window > 0;
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

const KVLayerLayout& KVPool::layout(int layer_id) const {
  return at(layer_id).layout;
}

const Tensor& KVPool::k_buffer(int layer_id) const {
  return at(layer_id).k;
}

const Tensor& KVPool::v_buffer(int layer_id) const {
  return at(layer_id).v;
}

void KVPool::store(int layer_id, const int32_t* slots, int n, const float* k, const float* v) {
  const auto& b = at(layer_id);
  STRATA_CHECK(b.k.on_host() && b.layout.dtype == DType::F32,
               "KVPool::store writes f32 host rows; layer {} lives in {}", layer_id,
               b.k.describe());
  const int kw = b.layout.k_width(), vw = b.layout.v_width();
  float* kd = static_cast<float*>(b.k.raw());
  float* vd = static_cast<float*>(b.v.raw());
  const int64_t rows = b.k.rows();
  for (int i = 0; i < n; ++i) {
    STRATA_CHECK(slots[i] > 0 && slots[i] < rows, "slot {} outside layer {}'s {} rows", slots[i],
                 layer_id, rows);
    std::memcpy(kd + static_cast<size_t>(slots[i]) * kw, k + static_cast<size_t>(i) * kw,
                kw * sizeof(float));
    if (!b.layout.v_in_k)
      std::memcpy(vd + static_cast<size_t>(slots[i]) * vw, v + static_cast<size_t>(i) * vw,
                  vw * sizeof(float));
  }
}

size_t KVPool::bytes() const {
  return bytes_per_slot([this] {
           std::map<int, KVLayerLayout> m;
           for (const auto& [id, i] : index_) m[id] = layers_[i].layout;
           return m;
         }()) *
         static_cast<size_t>(num_slots_);
}

}  // namespace strata
