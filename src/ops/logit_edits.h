#pragma once
// One definition of how a request's sampling controls change its logits before the draw, for
// every device. The host turns a request's controls (logit_bias, min_new_tokens, the
// repetition / frequency / presence penalties; runtime/sampler.h) into a sparse list of edits,
// at most one per (row, token); the CPU reference and the CUDA kernel apply the list in
// place, so the draw that follows (ops/sampling.h) sees the same row on every device:
//
//   x' = penalized(x + bias) + shift,   penalized(y) = y > 0 ? y / repetition : y * repetition
//
// (shift = -inf bans a token: a stop token before min_new_tokens). This is vLLM's order:
// logit_bias, then the ban, then the repetition penalty, then frequency and presence.
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace strata {

// One edit, packed as 5 int32 (it travels with the pass's metadata). Rows < 0 are padding.
struct LogitEdit {
  int32_t row = -1;         // request (logits row) of the pass
  int32_t token = 0;        // column
  float bias = 0.0f;        // added first (logit_bias)
  float repetition = 1.0f;  // then positive logits divided by it, negative ones multiplied
  float shift = 0.0f;       // then added (-frequency x count - presence; -inf: banned)

  STRATA_HOST_DEVICE float apply(float x) const {
    const float y = x + bias;
    return (repetition == 1.0f ? y : y > 0.0f ? y / repetition : y * repetition) + shift;
  }
  STRATA_HOST_DEVICE static LogitEdit unpack(const int32_t* packed) {
    LogitEdit e;
    memcpy(static_cast<void*>(&e), packed, sizeof(e));
    return e;
  }
  void pack(int32_t* packed) const {
    memcpy(packed, static_cast<const void*>(this), sizeof(*this));
  }
};
static_assert(sizeof(LogitEdit) == 5 * sizeof(int32_t), "LogitEdit packs as 5 int32");
constexpr int kLogitEditInts = 5;

// Room for `n` edits in a pass: a power of two from 64 (0 for none), so that the passes of a
// decode loop share a few captured shapes while penalties collect tokens.
inline int logit_edit_capacity(size_t n) {
  if (n == 0) return 0;
  int cap = 64;
  while (static_cast<size_t>(cap) < n) cap *= 2;
  return cap;
}

// The CPU reference: applies `n` packed edits to logits [rows, vocab] (row stride `stride`).
void apply_logit_edits(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                       const int32_t* packed, int64_t n);

}  // namespace strata
