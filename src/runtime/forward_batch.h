#pragma once
// ForwardBatch: what one forward pass computes. Tokens of all requests are laid out flat,
// request after request; each request brings `extend_len` new tokens on top of
// `prefix_len` tokens already in the cache (a decode step is an extend of 1).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/logit_edits.h"
#include "ops/sampling.h"
#include "ops/state_seqs.h"
#include "ops/token_masks.h"

namespace strata {

enum class ForwardMode { Extend, Decode };

struct ForwardBatch {
  ForwardMode mode = ForwardMode::Extend;
  std::vector<int32_t> input_ids;         // [T]
  std::vector<int32_t> positions;         // [T]
  std::vector<int32_t> out_cache_loc;     // [T] KV slot of each new token
  std::vector<int32_t> req_pool_indices;  // [B] rows of the ReqToTokenPool
  std::vector<int32_t> prefix_lens;       // [B] tokens cached before this pass
  std::vector<int32_t> extend_lens;       // [B] new tokens in this pass
  std::vector<int32_t> state_slots;       // [B] recurrent-state slots (hybrid models)
  bool return_all_logits = false;         // logits for every token, not only each request's last
  // A sampled pass with return_all_logits: the token rows (flat indices) whose logits rows come
  // back beside the draw, which reads each request's last row as always (prompt logprobs).
  std::vector<int32_t> logits_rows;
  // [B] how each request draws its next token when the pass returns ids (ModelRunner::
  // forward_sampled) instead of logits; empty: every request greedy.
  std::vector<SamplingRow> sampling;
  // Sampled passes also take: changes to the logits before the draw (the requests' logit_bias,
  // bans and penalties; ops/logit_edits.h), the log-probabilities to return for every row
  // (-1: none; else the drawn token's and the top_logprobs most likely; ops/logprobs.h), and
  // the rows whose raw logits come back as well.
  std::vector<LogitEdit> logit_edits;
  int top_logprobs = -1;
  std::vector<int32_t> raw_logit_rows;
  // Structured output: the rows whose draw a grammar constrains, and their allowed-token masks
  // (token_mask_words(vocab) words each, in mask_rows' order; ops/token_masks.h).
  std::vector<int32_t> mask_rows;
  std::vector<uint64_t> token_masks;

  int batch_size() const { return static_cast<int>(req_pool_indices.size()); }
  int num_tokens() const { return static_cast<int>(input_ids.size()); }
  int seq_len(int b) const { return prefix_lens[b] + extend_lens[b]; }
  // Offset of request b's first token in the flat token arrays.
  std::vector<int> token_offsets() const {
    std::vector<int> off(batch_size() + 1, 0);
    for (int b = 0; b < batch_size(); ++b) off[b + 1] = off[b] + extend_lens[b];
    return off;
  }
  // The logit edits as kLogitEditInts int32 each, padded with no-ops to `capacity`.
  void pack_logit_edits(int32_t* out, int capacity) const {
    for (int i = 0; i < capacity; ++i) {
      const LogitEdit e = i < static_cast<int>(logit_edits.size()) ? logit_edits[i] : LogitEdit{};
      e.pack(out + static_cast<int64_t>(i) * kLogitEditInts);
    }
  }
  // The masked rows (padded with -1 to `capacity`), then their masks as int32 pairs (low half
  // first; the padding's are zero).
  int64_t token_mask_ints() const {
    return mask_rows.empty() ? 0 : 2 * static_cast<int64_t>(token_masks.size() / mask_rows.size());
  }
  void pack_token_masks(int32_t* rows_out, int32_t* masks_out, int capacity) const {
    pack_masks(mask_rows, token_masks, rows_out, masks_out, capacity);
  }
  // The same for any rows and masks (the grammar masks a pass gets after its forward).
  static void pack_masks(const std::vector<int32_t>& rows, const std::vector<uint64_t>& masks,
                         int32_t* rows_out, int32_t* masks_out, int capacity) {
    const int64_t ints = rows.empty() ? 0 : 2 * static_cast<int64_t>(masks.size() / rows.size());
    for (int i = 0; i < capacity; ++i) {
      const bool used = i < static_cast<int>(rows.size());
      rows_out[i] = used ? rows[i] : -1;
      int32_t* m = masks_out + i * ints;
      if (!used) {
        std::fill(m, m + ints, 0);
        continue;
      }
      const uint64_t* w = masks.data() + i * (ints / 2);
      for (int64_t j = 0; j < ints / 2; ++j) {
        m[2 * j] = static_cast<int32_t>(static_cast<uint32_t>(w[j]));
        m[2 * j + 1] = static_cast<int32_t>(static_cast<uint32_t>(w[j] >> 32));
      }
    }
  }
  // The recurrent layers' seqs, kStateSeqInts int32 per request (ops/state_seqs.h); slot -1
  // for models without recurrent layers (no op reads them then).
  void pack_state_seqs(int32_t* out) const {
    const std::vector<int> off = token_offsets();
    for (int b = 0; b < batch_size(); ++b, out += kStateSeqInts) {
      out[0] = off[b];
      out[1] = extend_lens[b];
      out[2] = state_slots.empty() ? -1 : state_slots[b];
      out[3] = prefix_lens[b] > 0 ? 1 : 0;
    }
  }
  // batch.sampling as kSamplingRowInts int32 per request (greedy rows when it is empty).
  void pack_sampling(int32_t* out) const {
    for (int b = 0; b < batch_size(); ++b) {
      const SamplingRow row = sampling.empty() ? SamplingRow::greedy() : sampling[b];
      row.pack(out + static_cast<int64_t>(b) * kSamplingRowInts);
    }
  }
};

// What a pass computes after the model, beside its shape; a captured graph is one of these.
struct PassKind {
  bool sampled = false;   // ids drawn on the device (else logits returned)
  int edit_capacity = 0;  // room for logit edits before the draw (logit_edit_capacity)
  int top_logprobs = -1;  // logprobs of every row's draw (-1: none)
  int mask_capacity = 0;  // room for grammar-masked rows (token_mask_capacity)
  bool keep_raw = false;  // the raw logits outlive edits and masks (logprobs or raw rows back)
  // The grammar masks come after the forward (computed while it ran): the pass stops at the
  // edited logits, and ModelRunner draws from them once the masks are on the device.
  bool late_masks = false;
  auto operator<=>(const PassKind&) const = default;

  static PassKind logits() { return {}; }
  // `late_mask_rows`: rows whose masks come after the forward (then batch.mask_rows is empty).
  static PassKind sampled_for(const ForwardBatch& batch, int late_mask_rows = 0) {
    PassKind k;
    k.sampled = true;
    k.edit_capacity = logit_edit_capacity(batch.logit_edits.size());
    k.top_logprobs = batch.top_logprobs;
    k.late_masks = late_mask_rows > 0;
    k.mask_capacity =
        token_mask_capacity(static_cast<int64_t>(batch.mask_rows.size()) + late_mask_rows);
    k.keep_raw = (k.edit_capacity > 0 || k.mask_capacity > 0) &&
                 (batch.top_logprobs >= 0 || !batch.raw_logit_rows.empty());
    return k;
  }
};

}  // namespace strata
