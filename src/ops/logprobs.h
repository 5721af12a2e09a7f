#pragma once
// One definition of the log-probabilities a pass returns (OpenAI's logprobs), for every
// device: of the model's own distribution (log-softmax of the raw logits, before logit edits,
// temperature and filtering), at the token drawn, and the top_n most likely tokens, most
// likely first (ties: the lower id first, as torch.topk). Per row of a pass the result is
// kLogprobHead + 2 x top_n floats:
//
//   [logprob of the drawn token, id_1, logprob_1, ..., id_n, logprob_n]
//
// with ids as floats (exact: vocabularies are below 2^24, checked where the op is called).
#include <cstdint>

#include "core/host_device.h"

namespace strata {

constexpr int kLogprobHead = 1;
constexpr int kMaxTopLogprobs = 20;  // OpenAI's limit; the kernels keep this many per row
STRATA_HOST_DEVICE inline int logprob_row_width(int top_n) {
  return kLogprobHead + 2 * top_n;
}

// The CPU reference on one row of `vocab` logits; out holds logprob_row_width(top_n) floats.
void row_logprobs(const float* logits, int vocab, int token, int top_n, float* out);

}  // namespace strata
