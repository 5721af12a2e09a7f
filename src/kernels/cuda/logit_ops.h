#pragma once
// What happens to a pass's logits besides the draw (ops/logit_edits.h and ops/logprobs.h
// state the rules; the CPU references are beside them). Logits are f32 [rows, vocab] with row
// stride `stride`.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

// Applies `capacity` packed LogitEdits in place (rows < 0 are padding); at most one per
// (row, token), so they run in parallel.
void edit_logits(float* logits, int64_t stride, int64_t rows, int64_t vocab, const int32_t* edits,
                 int64_t capacity, cudaStream_t stream);

// Bans the tokens of row mask_rows[i] (-1: padding) that mask i does not allow, for n masks of
// 2 x token_mask_words(vocab) int32 each (ops/token_masks.h).
void mask_logits(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                 const int32_t* mask_rows, const int32_t* masks, int64_t n, cudaStream_t stream);

// out[r] = logprob_row_width(top_n) floats: the log-softmax of row r at ids[r], then the
// top_n most likely (id, logprob) pairs; top_n <= kMaxTopLogprobs.
void logprobs(const float* logits, int64_t stride, int64_t rows, int64_t vocab, const int32_t* ids,
              int top_n, float* out, cudaStream_t stream);

}  // namespace strata::cuda
