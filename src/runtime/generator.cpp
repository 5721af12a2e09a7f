#include "runtime/generator.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/generation_state.h"

namespace strata {

void validate_requests(const ModelConfig& config, int max_context_len,
                       const std::vector<GenerateRequest>& requests) {
  const int vocab = config.vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    if (r.input_ids.empty())
      throw RequestError(fmt::format("prompt {} is empty: give at least one input id", i));
    for (size_t j = 0; j < r.input_ids.size(); ++j)
      if (r.input_ids[j] < 0 || r.input_ids[j] >= vocab)
        throw RequestError(
            fmt::format("prompt {}: input id {} at position {} is outside the "
                        "vocabulary (valid ids are 0..{})",
                        i, r.input_ids[j], j, vocab - 1));
    r.sampling.validate();
    const int64_t total = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
    if (total > max_context_len)
      throw RequestError(
          fmt::format("prompt {}: {} prompt tokens + {} new tokens exceed the context "
                      "length {}; shorten the prompt or lower --max-new-tokens",
                      i, r.input_ids.size(), r.sampling.max_new_tokens, max_context_len));
  }
}

void validate_requests(const ModelRunner& runner, const std::vector<GenerateRequest>& requests) {
  validate_requests(runner.config(), runner.max_context_len(), requests);
}

std::vector<std::vector<int>> split_into_micro_batches(int n, int parts) {
  parts = std::max(1, std::min(parts, n));
  std::vector<std::vector<int>> groups(parts);
  for (int g = 0, next = 0; g < parts; ++g) {
    const int size = n / parts + (g < n % parts ? 1 : 0);
    for (int i = 0; i < size; ++i) groups[g].push_back(next++);
  }
  return groups;
}

int64_t kv_slots_needed(const std::vector<GenerateRequest>& requests, int page_size) {
  int64_t slots = 0;
  for (const auto& r : requests) {
    const int64_t len = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
    slots += (len + page_size - 1) / page_size * page_size;
  }
  return std::max<int64_t>(slots, page_size);
}

std::vector<GenerateOutput> generate(ModelRunner& runner,
                                     const std::vector<GenerateRequest>& requests,
                                     const GenerateOptions& options, GenerateStats* stats) {
  validate_requests(runner, requests);
  GenerationState state(runner.config(), runner.memory(), runner.state_pool(), requests, options);
  const auto groups = split_into_micro_batches(static_cast<int>(requests.size()),
                                               std::max(1, options.micro_batches));
  // Each pass: the next prompt pieces while any prompt of the group is unread, then one token
  // per request. Groups take turns, as the pipeline's micro-batches do.
  // Without logits returned, each request's token is drawn where the logits are (on a GPU: no
  // logits copied back), by the rule every device shares (ops/sampling.h).
  const bool on_device = !options.return_logits && !options.return_input_logprobs;
  std::vector<int> members;
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (const auto& group : groups) {
      const ForwardBatch batch = state.next_batch(group, &members);
      if (members.empty()) continue;
      progressed = true;
      if (on_device) {
        std::vector<int32_t> ids = runner.forward_sampled(batch).ids;
        for (size_t b = 0; b < members.size(); ++b)
          if (!state.ready_to_sample(members[b])) ids[b] = -1;  // still mid-prompt
        state.accept(members, ids, nullptr);
      } else {
        const Tensor logits = runner.forward(batch);
        state.accept(members, state.sample(members, logits), &logits);
      }
    }
  }
  if (stats) *stats = state.stats();
  return state.outputs();
}

}  // namespace strata
