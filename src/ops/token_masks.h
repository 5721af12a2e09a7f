#pragma once
// Allowed-token masks (structured output), one definition for every device: bit t % 64 of word
// t / 64 of a row's mask says whether token t may be drawn; every other logit of that row
// becomes -inf before the draw (after the logit edits: a bias or a penalty may reorder the
// allowed tokens, never allow another). In the pass metadata a mask is 2 x words int32, the
// low half of each word first, so bit t % 32 of int32 t / 32 is token t's.
#include <cstdint>

#include "core/host_device.h"

namespace strata {

STRATA_HOST_DEVICE inline int64_t token_mask_words(int64_t vocab) {
  return (vocab + 63) / 64;
}

// Room for `n` masked rows in a pass: a power of two (0 for none), so that decode passes share
// a few captured shapes.
inline int token_mask_capacity(int64_t n) {
  if (n == 0) return 0;
  int cap = 1;
  while (cap < n) cap *= 2;
  return cap;
}

// The CPU reference: for each of `n` entries with mask_rows[i] >= 0 (-1: padding), bans the
// tokens of row mask_rows[i] of logits [rows, vocab] (row stride `stride`) that mask i (at
// masks + i * 2 * token_mask_words(vocab), as int32 above) does not allow.
void apply_token_masks(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                       const int32_t* mask_rows, const int32_t* masks, int64_t n);

}  // namespace strata
