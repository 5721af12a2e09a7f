#include "ops/logit_edits.h"

namespace strata {

void apply_logit_edits(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                       const int32_t* packed, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const LogitEdit e = LogitEdit::unpack(packed + i * kLogitEditInts);
    if (e.row < 0 || e.row >= rows || e.token < 0 || e.token >= vocab) continue;
    float& x = logits[e.row * stride + e.token];
    x = e.apply(x);
  }
}

}  // namespace strata
