#include "runtime/batch_builder.h"

#include <algorithm>

namespace strata {

bool append_extend(ForwardBatch& batch, TokenMemory& memory, int req_pool_idx, int state_slot,
                   const std::vector<int>& tokens, int cached, int n) {
  std::vector<int32_t> slots(n);
  if (!memory.extend(req_pool_idx, cached, cached + n, slots.data())) return false;
  batch.req_pool_indices.push_back(req_pool_idx);
  batch.prefix_lens.push_back(cached);
  batch.extend_lens.push_back(n);
  batch.state_slots.push_back(state_slot);
  for (int i = 0; i < n; ++i) {
    batch.input_ids.push_back(tokens[cached + i]);
    batch.positions.push_back(cached + i);
    batch.out_cache_loc.push_back(slots[i]);
  }
  return true;
}

bool is_stop_token(const SamplingParams& p, const std::vector<int>& eos_ids, int token) {
  if (p.stop_at_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end())
    return true;
  return std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
         p.stop_token_ids.end();
}

}  // namespace strata
