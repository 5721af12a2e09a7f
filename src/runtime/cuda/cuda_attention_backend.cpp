#include "runtime/cuda/cuda_attention_backend.h"

#include <algorithm>

#include "core/error.h"
#include "ops/ops.h"

namespace strata {

CudaAttentionBackend::CudaAttentionBackend(KVPool* pool, const ReqToTokenPool* host_table,
                                           cudaStream_t stream,
                                           const ReqToTokenPool* host_window_table)
    : pool_(pool),
      host_table_(host_table),
      host_window_table_(host_window_table),
      stream_(stream),
      max_requests_(host_table->max_requests()),
      max_context_len_(host_table->max_context_len()) {
  const size_t table_bytes =
      static_cast<size_t>(max_requests_) * max_context_len_ * sizeof(int32_t);
  req_to_token_.ensure(table_bytes);
  STRATA_CUDA_CHECK(cudaMemset(req_to_token_.data(), 0, table_bytes));
  STRATA_CHECK(pool_->window_slots() == 0 || host_window_table_ != nullptr,
               "a KV pool with a window space needs the window table");
  if (host_window_table_) {
    window_table_.ensure(table_bytes);
    STRATA_CUDA_CHECK(cudaMemset(window_table_.data(), 0, table_bytes));
  }
  for (int id : pool_->layer_ids()) max_lv_ = std::max(max_lv_, pool_->layout(id).v_head_dim);
  STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
}

CudaAttentionBackend::~CudaAttentionBackend() {
  if (staging_) cudaFreeHost(staging_);
  if (queued_) cudaEventDestroy(queued_);
}

void CudaAttentionBackend::reset_table() {
  const size_t bytes = static_cast<size_t>(max_requests_) * max_context_len_ * sizeof(int32_t);
  STRATA_CUDA_CHECK(cudaMemsetAsync(req_to_token_.data(), 0, bytes, stream_));
  if (host_window_table_)
    STRATA_CUDA_CHECK(cudaMemsetAsync(window_table_.data(), 0, bytes, stream_));
}

Tensor CudaAttentionBackend::ints(int64_t offset, int64_t n) const {
  return Tensor::view(meta_.as<int32_t>() + offset, {n}, DType::I32,
                      Device::cuda(cuda::current_device()));
}

void CudaAttentionBackend::ensure_staging(size_t count) {
  if (count <= staging_capacity_) return;
  if (staging_) STRATA_CUDA_CHECK(cudaFreeHost(staging_));
  staging_ = nullptr;
  const size_t cap = std::max<size_t>(count, 2 * staging_capacity_);
  STRATA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&staging_), cap * sizeof(int32_t)));
  staging_capacity_ = cap;
}

void CudaAttentionBackend::mark_queued() {
  STRATA_CUDA_CHECK(cudaEventRecord(queued_, stream_));
  marked_ = true;
}

void CudaAttentionBackend::reserve(int max_tokens, int max_batch, int num_q_heads) {
  // The metadata layout of stage(): ids, positions, slots, window slots (per token), rows,
  // prefixes, offsets (+1), last rows, sampling rows (per request).
  const size_t count = 4 * static_cast<size_t>(max_tokens) +
                       (4 + kSamplingRowInts) * static_cast<size_t>(max_batch) + 1;
  ensure_staging(count);
  meta_.ensure(count * sizeof(int32_t));
  const size_t parts = static_cast<size_t>(max_batch) * num_q_heads * cuda::kMaxDecodeSplits;
  partial_out_.ensure(parts * max_lv_ * sizeof(float));
  partial_lse_.ensure(parts * sizeof(float));
}

void CudaAttentionBackend::prepare(const ForwardBatch& batch) {
  stage(batch);
  upload();
}

int CudaAttentionBackend::decode_splits(const KVLayerLayout& layout) const {
  if (forced_splits_ > 0) return std::min(forced_splits_, cuda::kMaxDecodeSplits);
  const int blocks_per_sm = cuda::default_decode_blocks_per_sm(
      layout.num_kv_heads, layout.k_head_dim, layout.v_head_dim, layout.v_in_k);
  return cuda::choose_decode_splits(batch_size_, layout.num_kv_heads, max_seq_len_,
                                    cuda::sm_count(), blocks_per_sm);
}

std::vector<const void*> CudaAttentionBackend::buffer_signature() const {
  // Sizes as well as addresses: a buffer that grows may come back at the address it was freed
  // from, and a graph captured over the old allocation (its upload copies from the pinned
  // staging buffer) must not be replayed over the new one: the driver crashes in
  // cudaGraphLaunch. The sizes only ever grow, so a regrown buffer always changes them.
  auto size = [](size_t bytes) { return reinterpret_cast<const void*>(bytes); };
  return {req_to_token_.data(),       size(req_to_token_.bytes()),
          window_table_.data(),       meta_.data(),
          size(meta_.bytes()),        staging_,
          size(staging_capacity_),    partial_out_.data(),
          size(partial_out_.bytes()), partial_lse_.data(),
          size(partial_lse_.bytes())};
}

void CudaAttentionBackend::stage(const ForwardBatch& batch) {
  const int t = batch.num_tokens(), b = batch.batch_size();
  STRATA_CHECK(static_cast<int>(batch.positions.size()) == t &&
                   static_cast<int>(batch.out_cache_loc.size()) == t &&
                   static_cast<int>(batch.prefix_lens.size()) == b &&
                   static_cast<int>(batch.extend_lens.size()) == b &&
                   (batch.state_slots.empty() || static_cast<int>(batch.state_slots.size()) == b),
               "inconsistent ForwardBatch: {} tokens, {} requests", t, b);
  const std::vector<int> offsets = batch.token_offsets();
  STRATA_CHECK(offsets[b] == t, "extend lengths add up to {}, the batch has {} tokens", offsets[b],
               t);
  max_extend_ = 0;
  max_seq_len_ = 0;
  for (int i = 0; i < b; ++i) {
    STRATA_CHECK(batch.req_pool_indices[i] >= 0 && batch.req_pool_indices[i] < max_requests_,
                 "request row {}", batch.req_pool_indices[i]);
    if (batch.seq_len(i) > max_context_len_)
      throw RequestError(fmt::format("request {} reaches {} tokens, over the context length {}", i,
                                     batch.seq_len(i), max_context_len_));
    if (batch.mode == ForwardMode::Decode)
      STRATA_CHECK(batch.extend_lens[i] == 1, "decode with {} new tokens", batch.extend_lens[i]);
    max_extend_ = std::max(max_extend_, batch.extend_lens[i]);
    max_seq_len_ = std::max(max_seq_len_, batch.seq_len(i));
  }
  mode_ = batch.mode;
  batch_size_ = b;
  num_tokens_ = t;

  off_ids_ = 0;
  off_pos_ = off_ids_ + t;
  off_loc_ = off_pos_ + t;
  off_req_ = off_loc_ + t;
  off_prefix_ = off_req_ + b;
  off_offsets_ = off_prefix_ + b;
  off_last_ = off_offsets_ + b + 1;
  // Extend passes also bring the cached prefix of each request's row to the device mirror:
  // the scheduler shares prefix-cache hits into the host table, which the mirror never saw.
  // (Decode passes extend rows the mirror already holds, and are graph-captured with a fixed
  // metadata layout.)
  off_sampling_ = off_last_ + b;
  off_state_seqs_ = off_sampling_ + static_cast<int64_t>(b) * kSamplingRowInts;
  edit_capacity_ = logit_edit_capacity(batch.logit_edits.size());
  off_edits_ = off_state_seqs_ + static_cast<int64_t>(b) * kStateSeqInts;
  mask_capacity_ = token_mask_capacity(static_cast<int64_t>(batch.mask_rows.size()));
  mask_ints_ = batch.token_mask_ints();
  off_mask_rows_ = off_edits_ + static_cast<int64_t>(edit_capacity_) * kLogitEditInts;
  off_masks_ = off_mask_rows_ + mask_capacity_;
  // The new tokens' window slots (as TokenMemory::extend put them in the host window table).
  off_window_loc_ = off_masks_ + mask_capacity_ * mask_ints_;
  off_zero_ = off_window_loc_ + (host_window_table_ ? t : 0);
  off_shared_offsets_ = off_zero_ + b;
  off_shared_ = off_shared_offsets_ + b + 1;
  int64_t shared_total = 0;
  max_shared_ = 0;
  if (batch.mode == ForwardMode::Extend)
    for (int i = 0; i < b; ++i) {
      shared_total += batch.prefix_lens[i];
      max_shared_ = std::max(max_shared_, batch.prefix_lens[i]);
    }
  off_window_shared_ = off_shared_ + shared_total;
  const size_t count =
      static_cast<size_t>(batch.mode == ForwardMode::Extend
                              ? off_window_shared_ + (host_window_table_ ? shared_total : 0)
                              : off_zero_);
  // The previous pass may still read the staging buffer through its copy: wait for it, for
  // a bounded time (in a pipeline stage that pass may wait on a transfer from another process).
  if (!marked_) STRATA_CUDA_CHECK(cudaEventRecord(queued_, stream_));
  marked_ = false;
  if (!cuda::wait_event(queued_, wait_timeout_s_))
    fail(
        "waited {} s for the GPU to finish its queued work (the previous pass, or a hand-over "
        "from another pipeline stage); a stage it waits on is hung or dead, or a pass takes "
        "longer than --pp-timeout allows",
        wait_timeout_s_);
  ensure_staging(count);
  std::copy(batch.input_ids.begin(), batch.input_ids.end(), staging_ + off_ids_);
  std::copy(batch.positions.begin(), batch.positions.end(), staging_ + off_pos_);
  std::copy(batch.out_cache_loc.begin(), batch.out_cache_loc.end(), staging_ + off_loc_);
  std::copy(batch.req_pool_indices.begin(), batch.req_pool_indices.end(), staging_ + off_req_);
  std::copy(batch.prefix_lens.begin(), batch.prefix_lens.end(), staging_ + off_prefix_);
  for (int i = 0; i <= b; ++i) staging_[off_offsets_ + i] = offsets[i];
  for (int i = 0; i < b; ++i) staging_[off_last_ + i] = offsets[i + 1] - 1;
  batch.pack_sampling(staging_ + off_sampling_);
  batch.pack_state_seqs(staging_ + off_state_seqs_);
  batch.pack_logit_edits(staging_ + off_edits_, edit_capacity_);
  batch.pack_token_masks(staging_ + off_mask_rows_, staging_ + off_masks_, mask_capacity_);
  if (host_window_table_)
    for (int i = 0; i < b; ++i) {
      const int32_t* row = host_window_table_->row(batch.req_pool_indices[i]);
      std::copy_n(row + batch.prefix_lens[i], batch.extend_lens[i],
                  staging_ + off_window_loc_ + offsets[i]);
    }
  if (batch.mode == ForwardMode::Extend) {
    int32_t* shared = staging_ + off_shared_;
    int32_t* window_shared = staging_ + off_window_shared_;
    staging_[off_shared_offsets_] = 0;
    for (int i = 0; i < b; ++i) {
      staging_[off_zero_ + i] = 0;
      const int len = batch.prefix_lens[i];
      std::copy_n(host_table_->row(batch.req_pool_indices[i]), len, shared);
      shared += len;
      if (host_window_table_) {
        std::copy_n(host_window_table_->row(batch.req_pool_indices[i]), len, window_shared);
        window_shared += len;
      }
      staging_[off_shared_offsets_ + i + 1] = staging_[off_shared_offsets_ + i] + len;
    }
  }
  meta_.ensure(count * sizeof(int32_t));
  staged_count_ = count;
  prepared_ = true;
}

void CudaAttentionBackend::upload() {
  STRATA_CHECK(prepared_, "upload before stage");
  STRATA_CUDA_CHECK(cudaMemcpyAsync(meta_.data(), staging_, staged_count_ * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream_));
  const int32_t* m = meta_.as<int32_t>();
  // A device table gets the shared prefixes of extend passes, then the new tokens' slots.
  const auto mirror = [&](cuda::DeviceBuffer& table, int64_t off_shared, int64_t off_loc) {
    if (mode_ == ForwardMode::Extend && max_shared_ > 0)
      cuda::scatter_req_to_token(m + off_req_, m + off_zero_, m + off_shared_offsets_,
                                 m + off_shared, batch_size_, max_shared_, table.as<int32_t>(),
                                 max_context_len_, stream_);
    cuda::scatter_req_to_token(m + off_req_, m + off_prefix_, m + off_offsets_, m + off_loc,
                               batch_size_, max_extend_, table.as<int32_t>(), max_context_len_,
                               stream_);
  };
  mirror(req_to_token_, off_shared_, off_loc_);
  if (host_window_table_) mirror(window_table_, off_window_shared_, off_window_loc_);
}

void CudaAttentionBackend::forward(const AttentionCall& call, const Tensor& q, const Tensor& k,
                                   const Tensor& v, Tensor& out) {
  STRATA_CHECK(!q.on_host() && q.dtype() == DType::F32 && k.dtype() == DType::F32 &&
                   (v.empty() || v.dtype() == DType::F32) && out.contiguous(),
               "cuda attention takes f32 device q/k/v and a contiguous output: q {}, k {}, out {}",
               q.describe(), k.describe(), out.describe());
  const float* vp = v.empty() ? nullptr : v.ptr<float>();
  const int64_t v_stride = v.empty() ? 0 : v.row_stride();
  if (out.dtype() == DType::BF16)
    run(call, q.ptr<float>(), k.ptr<float>(), vp, q.row_stride(), k.row_stride(), v_stride,
        out.ptr<cuda::bf16>());
  else
    run(call, q.ptr<float>(), k.ptr<float>(), vp, q.row_stride(), k.row_stride(), v_stride,
        out.ptr<float>());
}

template <typename OutT>
void CudaAttentionBackend::run(const AttentionCall& call, float* q, const float* k, const float* v,
                               int64_t q_stride, int64_t k_stride, int64_t v_stride, OutT* out) {
  STRATA_CHECK(prepared_, "forward before prepare");
  STRATA_CHECK(!call.sinks || (!call.sinks->on_host() && call.sinks->dtype() == DType::F32 &&
                               call.sinks->numel() == call.num_q_heads),
               "layer {}: attention sinks {} for {} heads, want f32 on the device", call.layer_id,
               call.sinks ? call.sinks->describe() : "", call.num_q_heads);
  const KVLayerLayout& layout = pool_->layout(call.layer_id);
  STRATA_CHECK(call.num_q_heads % layout.num_kv_heads == 0, "{} q heads over {} kv heads",
               call.num_q_heads, layout.num_kv_heads);
  STRATA_CHECK(layout.dtype == DType::BF16 && !pool_->k_buffer(call.layer_id).on_host(),
               "the CUDA attention backend reads bf16 device KV, layer {} holds {}", call.layer_id,
               layout.describe());
  auto* k_rows = static_cast<cuda::bf16*>(pool_->k_buffer(call.layer_id).raw());
  auto* v_rows = static_cast<cuda::bf16*>(pool_->v_buffer(call.layer_id).raw());
  cuda::DeviceKV kv;
  kv.k = k_rows;
  kv.v = v_rows;
  kv.k_row_stride = layout.k_width();
  kv.v_row_stride = layout.v_row_stride();
  kv.num_kv_heads = layout.num_kv_heads;
  kv.k_head_dim = layout.k_head_dim;
  kv.v_head_dim = layout.v_head_dim;
  const int32_t* m = meta_.as<int32_t>();
  // Sliding layers in the window space: their rows are window slots, through the window table.
  const bool windowed = pool_->in_window_space(call.layer_id);
  STRATA_CHECK(!windowed || call.sliding_window > 0,
               "layer {} keeps only a window of positions but attends to all of them",
               call.layer_id);
  const int32_t* slots = m + (windowed ? off_window_loc_ : off_loc_);
  if (call.rope) {  // q and k arrive unrotated (backend.h): rotate, then store, in one kernel
    const RopeTable& r = *call.rope;
    STRATA_CHECK(!layout.v_in_k && !r.inv_freq.on_host() && !call.rope_positions->on_host() &&
                     r.rotary_dim <= layout.k_head_dim && r.inv_freq.numel() == r.rotary_dim / 2,
                 "layer {}: rope {} over {} with positions {}", call.layer_id,
                 r.inv_freq.describe(), layout.describe(), call.rope_positions->describe());
    const cuda::RopeArgs rope{call.rope_positions->ptr<int32_t>(), r.inv_freq.ptr<float>(),
                              r.rotary_dim, r.interleaved, r.cos_sin_scale};
    cuda::rope_store_kv(q, q_stride, call.num_q_heads, k, k_stride, v, v_stride, slots, num_tokens_,
                        layout.num_kv_heads, layout.k_head_dim, layout.v_width(), rope, k_rows,
                        layout.k_width(), v_rows, layout.v_row_stride(), stream_);
  } else {
    cuda::store_kv(k, k_stride, layout.v_in_k ? nullptr : v, v_stride, slots, num_tokens_,
                   layout.k_width(), layout.v_width(), k_rows, layout.k_width(), v_rows,
                   layout.v_row_stride(), stream_);
  }

  cuda::PagedBatch pb;
  pb.req_to_token = windowed ? window_table_.as<int32_t>() : req_to_token_.as<int32_t>();
  pb.req_to_token_stride = max_context_len_;
  pb.req_pool_indices = m + off_req_;
  pb.prefix_lens = m + off_prefix_;
  pb.token_offsets = m + off_offsets_;
  pb.batch = batch_size_;
  cuda::AttentionParams p;
  p.num_q_heads = call.num_q_heads;
  p.q_row_stride = q_stride;
  p.scale = call.scale;
  p.sliding_window = call.sliding_window;
  p.softcap = call.logit_softcap;
  p.sinks = call.sinks ? call.sinks->ptr<float>() : nullptr;

  if (mode_ == ForwardMode::Decode) {
    const int splits = decode_splits(layout);
    // Sized from the pool's layout report: Lv is the cached value width (DESIGN.md §1.2).
    partial_shape_ = {batch_size_, call.num_q_heads, splits, max_lv_};
    const size_t parts = static_cast<size_t>(batch_size_) * call.num_q_heads * splits;
    partial_out_.ensure(parts * max_lv_ * sizeof(float));
    partial_lse_.ensure(parts * sizeof(float));
    cuda::DecodeWorkspace ws{partial_out_.as<float>(), partial_lse_.as<float>(), splits};
    decode_kernel_ = cuda::decode_kernel_name(kv, pb, p, ws);
    cuda::decode_attention(q, kv, pb, p, ws, out, stream_);
  } else {
    cuda::extend_attention(q, kv, pb, p, max_extend_, out, stream_);
  }
}

}  // namespace strata
