#pragma once
// The CUDA attention backend: the AttentionBackend interface over the device KV pool, with
// device pointers for q, k, v and out. prepare() uploads the batch's metadata in one copy and
// brings the device mirror of the request -> slot table up to date; forward() writes the new
// keys/values into the cache and runs split-KV decode or tensor-core extend attention.
#include <string>
#include <vector>

#include "attention/backend.h"
#include "cache/kv_pool.h"
#include "cache/req_to_token_pool.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"

namespace strata {

class CudaAttentionBackend : public AttentionBackend {
 public:
  // `host_table`: the host request -> slot table the scheduler writes; prefixes it shares
  // into a request's row (prefix-cache hits) are copied to the device mirror at the request's
  // next extend. `host_window_table`: the window space's table (TokenMemory::window_table())
  // when the pool keeps sliding layers there, mirrored the same way; null otherwise.
  CudaAttentionBackend(KVPool* pool, const ReqToTokenPool* host_table, cudaStream_t stream,
                       const ReqToTokenPool* host_window_table = nullptr);
  ~CudaAttentionBackend() override;
  std::string name() const override { return "cuda"; }
  void prepare(const ForwardBatch& batch) override;  // stage() then upload()
  // Host half of prepare: checks the batch and fills the pinned staging copy of its metadata.
  void stage(const ForwardBatch& batch);
  // Device half: one copy of the staged metadata, then the request-table update. Only device
  // work, so a CUDA graph can capture it (replays copy whatever stage() left in the buffer).
  void upload();
  void ensure_staging(size_t count);
  // Decode split count the next decode pass will use for a layer of this layout (the stage
  // device keys its CUDA graphs on them).
  int decode_splits(const KVLayerLayout& layout) const;
  // Every device/pinned buffer a captured pass refers to; a graph is valid while this holds.
  std::vector<const void*> buffer_signature() const;
  // q [T, Hq * Dk], k [T, k_width], v [T, v_width]: f32 device tensors, row-strided views of
  // one fused projection allowed; out [T, Hq * Dv] bf16 (what the output projection reads)
  // or f32.
  void forward(const AttentionCall& call, const Tensor& q, const Tensor& k, const Tensor& v,
               Tensor& out) override;

  // Device copies of the prepared batch (int32), valid until the next stage().
  Tensor input_ids() const { return ints(off_ids_, num_tokens_); }
  Tensor positions() const { return ints(off_pos_, num_tokens_); }
  // Each request's last new token (the rows that get logits).
  Tensor last_token_rows() const { return ints(off_last_, batch_size_); }
  // How each request draws its token: [B, kSamplingRowInts] int32 (packed SamplingRow).
  Tensor sampling_rows() const {
    return ints(off_sampling_, static_cast<int64_t>(batch_size_) * kSamplingRowInts)
        .reshaped({batch_size_, kSamplingRowInts});
  }
  // The recurrent layers' view of the batch: [B, kStateSeqInts] int32 (ops/state_seqs.h).
  Tensor state_seqs() const {
    return ints(off_state_seqs_, static_cast<int64_t>(batch_size_) * kStateSeqInts)
        .reshaped({batch_size_, kStateSeqInts});
  }
  // The batch's logit edits: [capacity, kLogitEditInts] int32 (packed LogitEdit, padded).
  Tensor logit_edits() const {
    return ints(off_edits_, static_cast<int64_t>(edit_capacity_) * kLogitEditInts)
        .reshaped({edit_capacity_, kLogitEditInts});
  }
  // Grammar-masked rows [capacity] int32 (-1: padding) and their masks [capacity, ints].
  Tensor mask_rows() const { return ints(off_mask_rows_, mask_capacity_); }
  Tensor token_masks() const {
    return ints(off_masks_, mask_capacity_ * mask_ints_).reshaped({mask_capacity_, mask_ints_});
  }
  // Clears the device request table (after reserve passes that wrote dummy rows).
  void reset_table();

  // Decode partial-output shape of the last decode call: [batch, q heads, splits, Lv].
  const std::vector<int64_t>& decode_partial_shape() const { return partial_shape_; }
  // The stage-1 kernel of the last decode call (cuda::decode_kernel_name), for tests.
  const std::string& decode_kernel() const { return decode_kernel_; }
  // Forces the decode split count (tests); 0 restores the automatic choice.
  void set_decode_splits(int n) { forced_splits_ = n; }
  // The executor calls this once a pass is queued (its upload included): the next stage()
  // then waits for that pass only, not for work queued after it (a pipeline stage queues the
  // receive of its next input there; waiting for it would delay the next launch).
  void mark_queued();
  // Longest wait for the previous pass in stage() (0: no limit). Pipeline stages bound it:
  // their passes wait on transfers from other processes.
  void set_wait_timeout(double seconds) { wait_timeout_s_ = seconds; }
  // Allocates every buffer for passes of up to `max_tokens` tokens and `max_batch` requests
  // with `num_q_heads` query heads now, so that no later pass frees device memory (which would
  // wait for every transfer in flight).
  void reserve(int max_tokens, int max_batch, int num_q_heads);

 private:
  template <typename OutT>
  void run(const AttentionCall& call, float* q, const float* k, const float* v, int64_t q_stride,
           int64_t k_stride, int64_t v_stride, OutT* out);
  Tensor ints(int64_t offset, int64_t n) const;

  KVPool* pool_;
  const ReqToTokenPool* host_table_;
  const ReqToTokenPool* host_window_table_;
  cudaStream_t stream_;
  int max_requests_, max_context_len_;
  cuda::DeviceBuffer req_to_token_;  // [max_requests, max_context_len] int32
  cuda::DeviceBuffer window_table_;  // the same for the window space (when there is one)
  cuda::DeviceBuffer meta_;          // the batch's int32 arrays, one upload
  int32_t* staging_ = nullptr;       // pinned host copy of meta_
  size_t staging_capacity_ = 0, staged_count_ = 0;
  int64_t off_ids_ = 0, off_pos_ = 0, off_loc_ = 0, off_req_ = 0, off_prefix_ = 0, off_offsets_ = 0,
          off_last_ = 0, off_sampling_ = 0, off_state_seqs_ = 0, off_edits_ = 0, off_zero_ = 0,
          off_shared_offsets_ = 0, off_shared_ = 0, off_window_loc_ = 0, off_window_shared_ = 0;
  int edit_capacity_ = 0;  // logit edits staged (a power of two, or 0)
  int64_t off_mask_rows_ = 0, off_masks_ = 0, mask_ints_ = 0;
  int mask_capacity_ = 0;  // grammar-masked rows staged (a power of two, or 0)
  int max_shared_ = 0;     // longest prefix copied from the host table in this pass
  ForwardMode mode_ = ForwardMode::Extend;
  int batch_size_ = 0, num_tokens_ = 0, max_extend_ = 0, max_seq_len_ = 0;
  bool prepared_ = false;
  int max_lv_ = 0;  // widest cached value over the pool's layers (partial buffers are sized by it)
  int forced_splits_ = 0;
  double wait_timeout_s_ = 0;
  cudaEvent_t queued_ = nullptr;  // recorded after the previous pass (mark_queued, or stage())
  bool marked_ = false;
  std::vector<int64_t> partial_shape_;
  std::string decode_kernel_;
  cuda::DeviceBuffer partial_out_, partial_lse_;
};

}  // namespace strata
