#include "ops/token_masks.h"

#include <limits>

namespace strata {

void apply_token_masks(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                       const int32_t* mask_rows, const int32_t* masks, int64_t n) {
  const int64_t words = 2 * token_mask_words(vocab);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = mask_rows[i];
    if (r < 0 || r >= rows) continue;
    float* x = logits + r * stride;
    const uint32_t* m = reinterpret_cast<const uint32_t*>(masks + i * words);
    for (int64_t t = 0; t < vocab; ++t)
      if (!((m[t / 32] >> (t % 32)) & 1u)) x[t] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace strata
