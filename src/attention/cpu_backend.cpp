#include "attention/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cache/kv_pool.h"
#include "cache/req_to_token_pool.h"
#include "core/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/routing_rope.h"
#include "ops/ops.h"

namespace strata {

namespace {
constexpr int kMaxDecodeSplits = 16;
// Query heads of one KV head that one attention task takes (attend_group_range reads each key
// and value row once for up to 8 heads).
constexpr int kHeadsATask = 8;
constexpr float kNoSink = -std::numeric_limits<float>::infinity();
}  // namespace

std::unique_ptr<AttentionBackend> make_cpu_attention_backend(KVPool* pool,
                                                             const ReqToTokenPool* req_to_token,
                                                             const ReqToTokenPool* window_table) {
  return std::make_unique<CpuAttentionBackend>(pool, req_to_token, window_table);
}

CpuAttentionBackend::CpuAttentionBackend(KVPool* pool, const ReqToTokenPool* req_to_token,
                                         const ReqToTokenPool* window_table)
    : pool_(pool), req_to_token_(req_to_token), window_table_(window_table) {
  STRATA_CHECK(pool_->window_slots() == 0 || window_table_ != nullptr,
               "a KV pool with a window space needs the window table");
}

void CpuAttentionBackend::prepare(const ForwardBatch& batch) {
  batch_ = &batch;
  token_offsets_ = batch.token_offsets();
  // The window slots of the new tokens, as TokenMemory::extend put them in the window table.
  window_loc_.clear();
  if (!window_table_) return;
  for (int b = 0; b < batch.batch_size(); ++b) {
    const int32_t* row = window_table_->row(batch.req_pool_indices[b]);
    for (int i = 0; i < batch.extend_lens[b]; ++i)
      window_loc_.push_back(row[batch.prefix_lens[b] + i]);
  }
}

const ReqToTokenPool* CpuAttentionBackend::table_of(int layer_id) const {
  return pool_->in_window_space(layer_id) ? window_table_ : req_to_token_;
}

void CpuAttentionBackend::forward(const AttentionCall& call, const Tensor& q_in, const Tensor& k_in,
                                  const Tensor& v_in, Tensor& out_t) {
  STRATA_CHECK(batch_ != nullptr, "forward before prepare");
  // The kernels read rows back to back: views of a fused projection are copied out once.
  const auto packed = [](const Tensor& t) { return t.empty() || t.contiguous() ? t : t.clone(); };
  const Tensor q_c = packed(q_in), k_c = packed(k_in), v_c = packed(v_in);
  STRATA_CHECK(out_t.contiguous(), "attention output {} must be contiguous", out_t.describe());
  const KVLayerLayout& layout = pool_->layout(call.layer_id);
  if (call.rope) {  // q and k arrive unrotated (backend.h): every head, k_head_dim apart
    const RopeTable& r = *call.rope;
    const int32_t* positions = call.rope_positions->ptr<int32_t>();
    const int64_t tokens = batch_->num_tokens();
    const auto rotate = [&](const Tensor& t, int heads) {
      cpu::rope(t.ptr<float>(), tokens, heads, t.row_stride(), layout.k_head_dim, positions,
                r.inv_freq.data(), r.rotary_dim, r.interleaved, r.cos_sin_scale);
    };
    rotate(q_c, call.num_q_heads);
    rotate(k_c, layout.num_kv_heads);
  }
  const float* q = q_c.data();
  const float* k = k_c.data();
  const float* v = v_c.empty() ? nullptr : v_c.data();
  float* out = out_t.data();
  STRATA_CHECK(call.num_q_heads % layout.num_kv_heads == 0, "{} q heads over {} kv heads",
               call.num_q_heads, layout.num_kv_heads);
  STRATA_CHECK(layout.dtype == DType::F32 && pool_->k_buffer(call.layer_id).on_host(),
               "the CPU attention backend reads f32 host KV, layer {} holds {}", call.layer_id,
               layout.describe());
  const bool windowed = pool_->in_window_space(call.layer_id);
  STRATA_CHECK(!windowed || call.sliding_window > 0,
               "layer {} keeps only a window of positions but attends to all of them",
               call.layer_id);
  pool_->store(call.layer_id, windowed ? window_loc_.data() : batch_->out_cache_loc.data(),
               batch_->num_tokens(), k, v);
  if (batch_->mode == ForwardMode::Decode)
    decode(call, q, out);
  else
    extend(call, q, out);
}

static cpu::PagedKV paged_view(KVPool* pool, int layer_id) {
  const KVLayerLayout& l = pool->layout(layer_id);
  cpu::PagedKV kv;
  kv.k = static_cast<const float*>(pool->k_buffer(layer_id).raw());
  kv.v = static_cast<const float*>(pool->v_buffer(layer_id).raw());
  kv.k_row_stride = l.k_width();
  kv.v_row_stride = l.v_row_stride();
  kv.k_head_dim = l.k_head_dim;
  kv.v_head_dim = l.v_head_dim;
  return kv;
}

// First cached position token at `pos` may see.
static int window_start(int pos, int window) {
  return window > 0 ? std::max(0, pos - window + 1) : 0;
}

void CpuAttentionBackend::extend(const AttentionCall& call, const float* q, float* out) {
  const KVLayerLayout& layout = pool_->layout(call.layer_id);
  const cpu::PagedKV kv = paged_view(pool_, call.layer_id);
  const int hq = call.num_q_heads, group = hq / layout.num_kv_heads;
  const int dk = layout.k_head_dim, dv = layout.v_head_dim;
  const int num_tokens = batch_->num_tokens();
  const cpu::ScoreParams sp{call.scale, call.logit_softcap};
  // token -> request
  std::vector<int> token_req(num_tokens);
  for (int b = 0; b < batch_->batch_size(); ++b)
    for (int t = token_offsets_[b]; t < token_offsets_[b + 1]; ++t) token_req[t] = b;

  // One task per token, KV head and up to kHeadsATask heads of its query group, as in decode.
  const int hkv = layout.num_kv_heads, chunks = (group + kHeadsATask - 1) / kHeadsATask;
#pragma omp parallel
  {
    std::vector<float> scores;
#pragma omp for collapse(3) schedule(dynamic, 2)
    for (int t = 0; t < num_tokens; ++t) {
      for (int kh = 0; kh < hkv; ++kh) {
        for (int c = 0; c < chunks; ++c) {
          const int b = token_req[t];
          const int pos = batch_->prefix_lens[b] + (t - token_offsets_[b]);
          const int32_t* slots = table_of(call.layer_id)->row(batch_->req_pool_indices[b]);
          const int begin = window_start(pos, call.sliding_window), end = pos + 1;
          const int h = kh * group + c * kHeadsATask,
                    heads = std::min(kHeadsATask, (kh + 1) * group - h);
          scores.resize(
              std::max<size_t>(scores.size(), static_cast<size_t>(heads) * (end - begin)));
          float lse[kHeadsATask];
          float* o = out + (static_cast<int64_t>(t) * hq + h) * dv;
          cpu::attend_group_range(q + (static_cast<int64_t>(t) * hq + h) * dk, heads, kv, kh, slots,
                                  begin, end, sp, scores.data(), o, dv, lse, 1);
          if (call.sinks) {
            for (int i = 0; i < heads; ++i) {
              std::vector<float> partial(o + i * dv, o + (i + 1) * dv);
              cpu::merge_partials(partial.data(), &lse[i], 1, dv, call.sinks->data()[h + i],
                                  o + i * dv);
            }
          }
        }
      }
    }
  }
}

void CpuAttentionBackend::decode(const AttentionCall& call, const float* q, float* out) {
  const KVLayerLayout& layout = pool_->layout(call.layer_id);
  const cpu::PagedKV kv = paged_view(pool_, call.layer_id);
  const int hq = call.num_q_heads, group = hq / layout.num_kv_heads;
  const int dk = layout.k_head_dim, dv = layout.v_head_dim;
  const int batch = batch_->batch_size();
  const cpu::ScoreParams sp{call.scale, call.logit_softcap};

  int max_len = 1;
  for (int b = 0; b < batch; ++b) {
    STRATA_CHECK(batch_->extend_lens[b] == 1, "decode with {} new tokens", batch_->extend_lens[b]);
    max_len = std::max(max_len, batch_->seq_len(b));
  }
  const int splits = std::clamp((max_len + split_tokens_ - 1) / split_tokens_, 1, kMaxDecodeSplits);
  // Sized from the pool's layout: Lv = v_head_dim of the cached value (kv_lora_rank for MLA).
  partial_shape_ = {batch, hq, splits, dv};
  partial_out_.assign(static_cast<size_t>(batch) * hq * splits * dv, 0.0f);
  partial_lse_.assign(static_cast<size_t>(batch) * hq * splits, 0.0f);

  // One task per request, KV head, range of keys and up to kHeadsATask heads of the head's
  // query group: the task reads its keys' rows once for all its heads (attend_group_range).
  const int hkv = layout.num_kv_heads, chunks = (group + kHeadsATask - 1) / kHeadsATask;
#pragma omp parallel
  {
    std::vector<float> scores;
#pragma omp for collapse(4) schedule(dynamic, 1)
    for (int b = 0; b < batch; ++b) {
      for (int kh = 0; kh < hkv; ++kh) {
        for (int c = 0; c < chunks; ++c) {
          for (int s = 0; s < splits; ++s) {
            const int t = token_offsets_[b];
            const int pos = batch_->seq_len(b) - 1;
            const int lo = window_start(pos, call.sliding_window), hi = pos + 1;
            const int chunk = (hi - lo + splits - 1) / splits;
            const int begin = std::min(hi, lo + s * chunk), end = std::min(hi, begin + chunk);
            const int32_t* slots = table_of(call.layer_id)->row(batch_->req_pool_indices[b]);
            const int h = kh * group + c * kHeadsATask,
                      heads = std::min(kHeadsATask, (kh + 1) * group - h);
            scores.resize(std::max<size_t>(scores.size(),
                                           static_cast<size_t>(heads) * std::max(end - begin, 1)));
            const int64_t part = (static_cast<int64_t>(b) * hq + h) * splits + s;
            cpu::attend_group_range(q + (static_cast<int64_t>(t) * hq + h) * dk, heads, kv, kh,
                                    slots, begin, end, sp, scores.data(),
                                    partial_out_.data() + part * dv, int64_t{splits} * dv,
                                    partial_lse_.data() + part, splits);
          }
        }
      }
    }
#pragma omp for collapse(2)
    for (int b = 0; b < batch; ++b) {
      for (int h = 0; h < hq; ++h) {
        const int64_t first = (static_cast<int64_t>(b) * hq + h) * splits;
        cpu::merge_partials(partial_out_.data() + first * dv, partial_lse_.data() + first, splits,
                            dv, call.sinks ? call.sinks->data()[h] : kNoSink,
                            out + (static_cast<int64_t>(token_offsets_[b]) * hq + h) * dv);
      }
    }
  }
}

}  // namespace strata
