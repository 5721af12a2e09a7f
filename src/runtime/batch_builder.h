#pragma once
// The pieces of batch construction that offline generation (generator.cpp) and the serving
// scheduler share: adding a request's next tokens to a ForwardBatch with their KV slots, and
// deciding whether a sampled token ends a request.
#include <vector>

#include "cache/req_to_token_pool.h"
#include "runtime/forward_batch.h"
#include "runtime/sampler.h"

namespace strata {

// Appends tokens[cached, cached + n) of the request in row `req_pool_idx` (recurrent state in
// `state_slot`, -1 for models without recurrent layers) to `batch`, allocating their KV
// slots. Returns false, changing nothing, when the pages run out.
bool append_extend(ForwardBatch& batch, TokenMemory& memory, int req_pool_idx, int state_slot,
                   const std::vector<int>& tokens, int cached, int n);

// Whether `token` ends a request: one of the model's EOS ids (unless the request ignores
// EOS) or one of the request's own stop token ids.
bool is_stop_token(const SamplingParams& p, const std::vector<int>& eos_ids, int token);

}  // namespace strata
