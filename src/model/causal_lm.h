#pragma once
// CausalLM: one pipeline stage of a decoder-only model. A stage owns the decoder layers
// [start_layer, end_layer); the first stage embeds tokens, the last normalizes and computes
// logits. With one stage, that is the whole model.
#include <map>
#include <memory>
#include <string>

#include "cache/kv_layout.h"
#include "cache/state_layout.h"
#include "core/tensor.h"
#include "model/config.h"
#include "ops/ops.h"
#include "runtime/forward_batch.h"

namespace strata {

class AttentionBackend;
class StatePool;

struct StagePlan {
  int start_layer = 0, end_layer = 0;  // [start, end)
  bool is_first = true, is_last = true;
  static StagePlan whole(const ModelConfig& c) { return {0, c.num_layers, true, true}; }
  bool owns(int layer_id) const { return layer_id >= start_layer && layer_id < end_layer; }
};

// What layers may use during a pass besides the batch itself: the device's ops, the batch's
// per-token inputs already on that device, and the backends of the stateful layer kinds.
struct ForwardContext {
  Ops* ops = nullptr;
  Tensor input_ids;        // [T] int32 (the first stage embeds them)
  Tensor positions;        // [T] int32
  Tensor last_token_rows;  // [B] int32: each request's last token (the rows that get logits)
  Tensor sampling;         // [B, kSamplingRowInts] int32: packed SamplingRow per request
  Tensor logit_edits;      // [capacity, kLogitEditInts] int32: packed LogitEdit, padded
  Tensor mask_rows;        // [capacity] int32: rows under a grammar (-1: padding)
  Tensor token_masks;      // [capacity, 2 x token_mask_words(vocab)] int32: their masks
  Tensor state_seqs;       // [B, kStateSeqInts] int32: recurrent layers' requests (ops.h)
  AttentionBackend* attention = nullptr;
  StatePool* recurrent_state = nullptr;  // per-request state of recurrent layers (hybrid models)
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const StagePlan& stage() const = 0;
  // KV layout of each attention layer this stage owns, keyed by global layer id; the KV pool
  // is built from exactly this.
  virtual std::map<int, KVLayerLayout> kv_layouts() const = 0;
  // State layout of each recurrent layer this stage owns (Mamba2, ...), keyed by global layer
  // id; the state pool is built from exactly this. Empty for models without recurrent layers.
  virtual std::map<int, RecurrentStateLayout> state_layouts() const { return {}; }
  // First stage: embeds batch.input_ids (hidden_in unused). Other stages: take hidden_in
  // [T, hidden]. Returns [T, hidden] for the next stage, or on the last stage logits
  // [rows, vocab]: one row per request (its last token) or, with return_all_logits, per token.
  // Everything on ctx.ops' device; the result is drawn from the pass's workspace.
  virtual Tensor forward(const ForwardBatch& batch, ForwardContext& ctx,
                         const Tensor& hidden_in) = 0;
};

}  // namespace strata
