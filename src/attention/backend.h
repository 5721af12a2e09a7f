#pragma once
// Attention backends: prepare per-batch metadata once, then run every attention layer of the
// pass. A backend writes the new tokens' keys/values into the KV pool and attends over the
// request's cached prefix plus its new tokens (causal, optionally windowed). Every width
// comes from the pool's layout report for the layer (DESIGN.md §1.2).
#include <memory>
#include <string>

#include "core/tensor.h"
#include "runtime/forward_batch.h"

namespace strata {

class KVPool;
class ReqToTokenPool;
struct RopeTable;

// What a layer tells the backend; shapes come from the pool.
struct AttentionCall {
  int layer_id = -1;
  int num_q_heads = 0;
  float scale = 1.0f;
  int sliding_window = 0;         // attend to the last `sliding_window` positions; 0 = all
  float logit_softcap = 0.0f;     // tanh soft-capping of scores; 0 = off
  const Tensor* sinks = nullptr;  // [num_q_heads] per-head sink logits (gpt-oss); null = none
  // Rotary embedding still to apply: q and k come unrotated, and the backend rotates them
  // (every head, k_head_dim apart) before it stores k and attends. Set by layers whose
  // rotation sits right before attention (GQA): the CUDA backend rotates q and k and writes
  // the cache in one kernel, where a rope launch and a store launch each paid a kernel's
  // latency. Null: q and k arrive rotated (or the layer has no rope).
  const RopeTable* rope = nullptr;
  const Tensor* rope_positions = nullptr;  // [T] int32, on the backend's device
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;
  virtual void prepare(const ForwardBatch& batch) = 0;
  // q: [T, Hq * k_head_dim]; k: [T, k_width]; v: [T, v_width] (empty when the layout keeps
  // v inside k); out: [T, Hq * v_head_dim]. Tensors on the backend's device; q, k and v may
  // be column views of one fused projection. With `call.rope` the backend may rotate q and k
  // in place.
  virtual void forward(const AttentionCall& call, const Tensor& q, const Tensor& k, const Tensor& v,
                       Tensor& out) = 0;
};

std::unique_ptr<AttentionBackend> make_cpu_attention_backend(
    KVPool* pool, const ReqToTokenPool* req_to_token, const ReqToTokenPool* window_table = nullptr);

}  // namespace strata
