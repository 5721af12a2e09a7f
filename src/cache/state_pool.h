#pragma once
// StatePool: the recurrent state of the recurrent layers (Mamba2, later short-conv and gated
// delta net) that one process owns, one slot per running request. Unlike the KV cache it does
// not grow with the sequence: a slot holds, per layer, the last inputs of the causal conv and
// the SSM state. It is addressed by global layer id like the KV pool and fails loudly, naming
// the ids it holds, for any other id (DESIGN.md §1.1). Slots are taken when a request is
// admitted and given back when it finishes; a full pool refuses the new request and leaves
// every running one untouched. With the prefix cache on, the radix tree also owns slots: state
// snapshots of cached prefixes (RadixCache), which it frees when it evicts them.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/state_layout.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace strata {

class Ops;

// Parses --mamba-ssm-dtype: float32 (default) or bfloat16.
DType parse_ssm_dtype(const std::string& name);

class StatePool {
 public:
  // `layers`: global layer id -> layout; `num_slots`: requests that can hold state at once.
  // The state lives where `ops` runs (allocated through it, persistent); without ops, on the
  // host through a CPU ops instance the pool owns.
  StatePool(std::map<int, RecurrentStateLayout> layers, int num_slots, DType ssm_dtype = DType::F32,
            Ops* ops = nullptr);
  ~StatePool();
  // The memory such a pool takes: what the runner checks against the device's budget first.
  static size_t bytes_for(const std::map<int, RecurrentStateLayout>& layers, int num_slots,
                          DType ssm_dtype);

  bool holds(int layer_id) const { return index_.count(layer_id) > 0; }
  std::vector<int> layer_ids() const;
  const RecurrentStateLayout& layout(int layer_id) const;
  DType ssm_dtype() const { return ssm_dtype_; }
  int num_slots() const { return num_slots_; }
  int available() const { return static_cast<int>(free_.size()); }

  // A zeroed slot for a new request (`zeroed` false: left as it is, for a slot about to be
  // overwritten by copy()). When every slot is taken this throws a RequestError that names
  // the limit and the flag; the pool is left exactly as it was.
  int alloc(bool zeroed = true);
  void free(int slot);
  bool in_use(int slot) const { return slot >= 0 && slot < num_slots_ && in_use_[slot]; }
  // Copies every layer's state of slot `from` into slot `to` (both held): a snapshot for the
  // prefix cache, or a cached snapshot into the slot of a request that resumes from it.
  void copy(int from, int to);

  // What the recurrent ops read and update: every slot's conv state [num_slots, conv_numel]
  // f32 (per slot [conv_channels, conv_width], oldest input first) and SSM state
  // [num_slots, ssm_numel] in ssm_dtype(), on the pool's device.
  Tensor& conv(int layer_id) { return at(layer_id).conv; }
  Tensor& ssm(int layer_id) { return at(layer_id).ssm; }

  // Host pools only (tests, inspection): one slot's conv state, and its SSM state in f32.
  float* conv_state(int layer_id, int slot);
  void read_ssm(int layer_id, int slot, float* out) const;
  void write_ssm(int layer_id, int slot, const float* in);
  size_t bytes() const;

 private:
  struct LayerState {
    RecurrentStateLayout layout;
    Tensor conv;  // [num_slots, conv_numel] f32
    Tensor ssm;   // [num_slots, ssm_numel] in ssm_dtype_
  };
  LayerState& at(int layer_id);
  const LayerState& at(int layer_id) const;
  void check_slot(int slot) const;
  void zero(int slot);

  std::unique_ptr<Ops> owned_ops_;  // a pool made without ops keeps its own CPU ops
  Ops* ops_;
  int num_slots_;
  DType ssm_dtype_;
  std::map<int, int> index_;  // global layer id -> local index
  std::vector<LayerState> layers_;
  std::vector<int> free_;
  std::vector<bool> in_use_;
};

}  // namespace strata
