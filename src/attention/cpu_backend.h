#pragma once
// The CPU reference backend. Extend attends each new token over the request's cached prefix
// and the new tokens before it; decode uses the split-KV scheme of the CUDA path (partial
// outputs [batch, heads, splits, Lv] + log-sum-exp, then a merge) so both are checked
// against the same math.
#include <vector>

#include "attention/backend.h"

namespace strata {

class CpuAttentionBackend : public AttentionBackend {
 public:
  // `window_table`: the window space's table (TokenMemory::window_table()) when the pool keeps
  // sliding layers there; their rows are then read and written through it.
  CpuAttentionBackend(KVPool* pool, const ReqToTokenPool* req_to_token,
                      const ReqToTokenPool* window_table = nullptr);
  std::string name() const override { return "cpu"; }
  void prepare(const ForwardBatch& batch) override;
  void forward(const AttentionCall& call, const Tensor& q, const Tensor& k, const Tensor& v,
               Tensor& out) override;

  // Shape of the decode partial-output buffer used by the last decode call:
  // [batch, q heads, splits, Lv], Lv taken from the pool's layout.
  const std::vector<int64_t>& decode_partial_shape() const { return partial_shape_; }
  // Tokens per KV split in decode (small values force many splits; tests use this).
  void set_decode_split_tokens(int n) { split_tokens_ = n; }

 private:
  void extend(const AttentionCall& call, const float* q, float* out);
  void decode(const AttentionCall& call, const float* q, float* out);
  // The table a layer's rows are addressed through.
  const ReqToTokenPool* table_of(int layer_id) const;

  KVPool* pool_;
  const ReqToTokenPool* req_to_token_;
  const ReqToTokenPool* window_table_;
  const ForwardBatch* batch_ = nullptr;
  std::vector<int32_t> window_loc_;  // the new tokens' window slots (window-space layers)
  std::vector<int> token_offsets_;
  int split_tokens_ = 256;
  std::vector<int64_t> partial_shape_;
  std::vector<float> partial_out_, partial_lse_;
};

}  // namespace strata
