#include "cache/state_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "ops/ops.h"

namespace strata {

std::string RecurrentStateLayout::describe() const {
  return fmt::format("{}: conv [{}, {}], ssm [{}, {}, {}]", to_string(kind), conv_channels,
                     conv_width, num_heads, head_dim, state_size);
}

DType parse_ssm_dtype(const std::string& name) {
  if (name == "float32" || name == "f32" || name == "fp32") return DType::F32;
  if (name == "bfloat16" || name == "bf16") return DType::BF16;
  fail("--mamba-ssm-dtype '{}' is not supported: use float32 or bfloat16", name);
}

StatePool::StatePool(std::map<int, RecurrentStateLayout> layers, int num_slots, DType ssm_dtype,
                     Ops* ops)
    : owned_ops_(ops ? nullptr : make_cpu_ops()),
      ops_(ops ? ops : owned_ops_.get()),
      num_slots_(num_slots),
      ssm_dtype_(ssm_dtype),
      in_use_(num_slots, false) {
  STRATA_CHECK(num_slots >= 1, "a state pool needs at least one slot, got {}", num_slots);
  STRATA_CHECK(ssm_dtype == DType::F32 || ssm_dtype == DType::BF16, "ssm dtype {}",
               dtype_name(ssm_dtype));
  for (auto& [id, layout] : layers) {
    STRATA_CHECK(layout.conv_numel() > 0 || layout.ssm_numel() > 0,
                 "layer {} has an empty state {}", id, layout.describe());
    index_[id] = static_cast<int>(layers_.size());
    LayerState s;
    s.layout = layout;
    // A kind without one of the two states (a short conv has no SSM) leaves it empty.
    if (layout.conv_numel() > 0)
      s.conv = ops_->allocate({num_slots, layout.conv_numel()}, DType::F32);
    if (layout.ssm_numel() > 0) s.ssm = ops_->allocate({num_slots, layout.ssm_numel()}, ssm_dtype);
    layers_.push_back(std::move(s));
  }
  // Hand out low slots first.
  for (int s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

StatePool::~StatePool() = default;

size_t StatePool::bytes_for(const std::map<int, RecurrentStateLayout>& layers, int num_slots,
                            DType ssm_dtype) {
  size_t per_slot = 0;
  for (const auto& [_, l] : layers)
    per_slot += static_cast<size_t>(l.conv_numel()) * sizeof(float) +
                static_cast<size_t>(l.ssm_numel()) * dtype_size(ssm_dtype);
  return per_slot * static_cast<size_t>(std::max(num_slots, 0));
}

std::vector<int> StatePool::layer_ids() const {
  std::vector<int> ids;
  for (const auto& [id, _] : index_) ids.push_back(id);
  return ids;
}

const StatePool::LayerState& StatePool::at(int layer_id) const {
  auto it = index_.find(layer_id);
  if (it == index_.end())
    throw Error(fmt::format(
        "state pool has no recurrent state for layer {}: it holds layers [{}]. The caller asked "
        "for "
        "a layer this process does not own or that has no recurrent state (an attention or MLP "
        "layer, or another pipeline stage's layer).",
        layer_id, fmt::join(layer_ids(), ", ")));
  return layers_[it->second];
}

StatePool::LayerState& StatePool::at(int layer_id) {
  return const_cast<LayerState&>(static_cast<const StatePool*>(this)->at(layer_id));
}

const RecurrentStateLayout& StatePool::layout(int layer_id) const {
  return at(layer_id).layout;
}

int StatePool::alloc(bool zeroed) {
  if (free_.empty())
    throw RequestError(fmt::format(
        "the recurrent-state cache is full: all {} request slots are held by running requests "
        "(--max-mamba-cache-size {}); retry when a request finishes, or raise "
        "--max-mamba-cache-size",
        num_slots_, num_slots_));
  const int slot = free_.back();
  free_.pop_back();
  in_use_[slot] = true;
  if (zeroed) zero(slot);
  return slot;
}

void StatePool::free(int slot) {
  check_slot(slot);
  in_use_[slot] = false;
  free_.push_back(slot);
}

void StatePool::copy(int from, int to) {
  check_slot(from);
  check_slot(to);
  if (from == to) return;
  for (auto& l : layers_) {
    for (Tensor* t : {&l.conv, &l.ssm}) {
      if (t->empty()) continue;
      Tensor dst = t->slice_rows(to, 1);
      ops_->copy(t->slice_rows(from, 1), dst);
    }
  }
}

void StatePool::check_slot(int slot) const {
  STRATA_CHECK(in_use(slot), "state slot {} is not held by a request (pool of {} slots)", slot,
               num_slots_);
}

void StatePool::zero(int slot) {
  for (auto& l : layers_)
    for (Tensor* t : {&l.conv, &l.ssm}) {
      if (t->empty()) continue;
      Tensor row = t->slice_rows(slot, 1);
      ops_->fill(row, 0.0f);
    }
}

float* StatePool::conv_state(int layer_id, int slot) {
  LayerState& l = at(layer_id);
  check_slot(slot);
  STRATA_CHECK(l.conv.on_host(), "conv_state of a pool on {}", l.conv.device().str());
  return l.conv.ptr<float>() + slot * l.layout.conv_numel();
}

void StatePool::read_ssm(int layer_id, int slot, float* out) const {
  const LayerState& l = at(layer_id);
  check_slot(slot);
  STRATA_CHECK(l.ssm.on_host(), "read_ssm of a pool on {}", l.ssm.device().str());
  const int64_t n = l.layout.ssm_numel();
  if (ssm_dtype_ == DType::F32)
    std::copy_n(l.ssm.ptr<float>() + slot * n, n, out);
  else
    convert_to_f32(DType::BF16, l.ssm.ptr<uint16_t>() + slot * n, out, n);
}

void StatePool::write_ssm(int layer_id, int slot, const float* in) {
  LayerState& l = at(layer_id);
  check_slot(slot);
  STRATA_CHECK(l.ssm.on_host(), "write_ssm of a pool on {}", l.ssm.device().str());
  const int64_t n = l.layout.ssm_numel();
  if (ssm_dtype_ == DType::F32)
    std::copy_n(in, n, l.ssm.ptr<float>() + slot * n);
  else
    for (int64_t i = 0; i < n; ++i) l.ssm.ptr<uint16_t>()[slot * n + i] = f32_to_bf16(in[i]);
}

size_t StatePool::bytes() const {
  size_t n = 0;
  for (const auto& l : layers_) n += l.conv.bytes() + l.ssm.bytes();
  return n;
}

}  // namespace strata
