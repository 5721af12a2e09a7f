#include "runtime/generator.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace strata {

namespace {

struct Running {
  int index;          // into requests / outputs
  int req_pool_idx;   // row in the ReqToTokenPool
  int state_slot;     // slot in the recurrent-state pool (-1: the model has no recurrent layer)
  std::vector<int> tokens;  // prompt + generated so far
  int cached = 0;     // tokens whose KV is in the cache
  std::mt19937_64 rng;
  bool done = false;
};

// Appends request r's tokens [cached, cached + n) to the batch, allocating their KV slots.
void add_extend(ForwardBatch& batch, TokenMemory& memory, Running& r, int n) {
  std::vector<int32_t> slots(n);
  if (!memory.extend(r.req_pool_idx, r.cached, r.cached + n, slots.data()))
    throw Error(fmt::format("out of KV cache memory: request {} needs {} more slots; raise "
                            "--max-total-tokens or send fewer requests at once",
                            r.index, n));
  batch.req_pool_indices.push_back(r.req_pool_idx);
  batch.prefix_lens.push_back(r.cached);
  batch.extend_lens.push_back(n);
  batch.state_slots.push_back(r.state_slot);
  for (int i = 0; i < n; ++i) {
    batch.input_ids.push_back(r.tokens[r.cached + i]);
    batch.positions.push_back(r.cached + i);
    batch.out_cache_loc.push_back(slots[i]);
  }
  r.cached += n;
}

bool is_stop(const SamplingParams& p, const std::vector<int>& eos, int token) {
  if (p.stop_at_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) return true;
  return std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
}

}  // namespace

void validate_requests(const ModelRunner& runner, const std::vector<GenerateRequest>& requests) {
  const int vocab = runner.config().vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    if (r.input_ids.empty())
      throw RequestError(fmt::format("prompt {} is empty: give at least one input id", i));
    for (size_t j = 0; j < r.input_ids.size(); ++j)
      if (r.input_ids[j] < 0 || r.input_ids[j] >= vocab)
        throw RequestError(fmt::format("prompt {}: input id {} at position {} is outside the "
                                       "vocabulary (valid ids are 0..{})",
                                       i, r.input_ids[j], j, vocab - 1));
    r.sampling.validate();
    const int64_t total = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
    if (total > runner.max_context_len())
      throw RequestError(fmt::format("prompt {}: {} prompt tokens + {} new tokens exceed the context "
                                     "length {}; shorten the prompt or lower --max-new-tokens",
                                     i, r.input_ids.size(), r.sampling.max_new_tokens,
                                     runner.max_context_len()));
  }
}

int64_t kv_slots_needed(const std::vector<GenerateRequest>& requests, int page_size) {
  int64_t slots = 0;
  for (const auto& r : requests) {
    const int64_t len = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
    slots += (len + page_size - 1) / page_size * page_size;
  }
  return std::max<int64_t>(slots, page_size);
}

std::vector<GenerateOutput> generate(ModelRunner& runner, const std::vector<GenerateRequest>& requests,
                                     const GenerateOptions& options) {
  validate_requests(runner, requests);
  TokenMemory& memory = runner.memory();
  const int vocab = runner.config().vocab_size;
  std::vector<GenerateOutput> outputs(requests.size());
  StatePool* states = runner.state_pool();
  std::vector<Running> running;
  // Gives back everything the requests hold; also runs when admission or a pass fails, so a
  // refused batch leaves the pools as it found them.
  auto release_all = [&]() {
    for (auto& r : running) {
      memory.release(r.req_pool_idx, r.cached);
      if (r.state_slot >= 0) states->free(r.state_slot);
    }
    running.clear();
  };
  try {
    for (size_t i = 0; i < requests.size(); ++i) {
      const int row = memory.req_to_token().alloc();
      if (row < 0)
        throw Error(fmt::format("{} prompts exceed --max-running-requests {}", requests.size(),
                                memory.req_to_token().max_requests()));
      Running r{static_cast<int>(i), row, -1, requests[i].input_ids, 0,
                std::mt19937_64(requests[i].sampling.seed), false};
      running.push_back(std::move(r));
      if (states) running.back().state_slot = states->alloc();
    }
  } catch (...) {
    release_all();
    throw;
  }

  // Records request r's next token (and the logits row behind it, when asked for).
  auto record = [&](Running& r, int token, const float* logits_row) {
    const auto& p = requests[r.index].sampling;
    auto& out = outputs[r.index];
    out.output_ids.push_back(token);
    if (options.return_logits) out.logits.emplace_back(logits_row, logits_row + vocab);
    r.tokens.push_back(token);
    if (is_stop(p, runner.config().eos_token_ids, token)) {
      out.finish_reason = "stop";
      r.done = true;
    } else if (static_cast<int>(out.output_ids.size()) >= p.max_new_tokens) {
      out.finish_reason = "length";
      r.done = true;
    }
  };
  // Greedy requests without logits returned need only the argmax, which the runner computes
  // where the logits are (on a GPU: no logits copied back).
  bool argmax_only = !options.return_logits;
  for (const auto& r : requests) argmax_only = argmax_only && (r.sampling.temperature == 0.0f || r.sampling.top_k == 1);
  // Runs `batch` and records a token for each member whose prompt is fully in the cache.
  auto step = [&](const ForwardBatch& batch, const std::vector<Running*>& members) {
    if (argmax_only) {
      const std::vector<int32_t> ids = runner.forward_greedy(batch);
      for (size_t b = 0; b < members.size(); ++b)
        if (members[b]->cached == static_cast<int>(members[b]->tokens.size())) record(*members[b], ids[b], nullptr);
      return;
    }
    const Tensor logits = runner.forward(batch);
    for (size_t b = 0; b < members.size(); ++b) {
      Running& r = *members[b];
      if (r.cached != static_cast<int>(r.tokens.size())) continue;
      const float* row = logits.row(static_cast<int64_t>(b));
      record(r, sample_token(row, vocab, requests[r.index].sampling, r.rng), row);
    }
  };
  for (auto& r : running)
    if (requests[r.index].sampling.max_new_tokens == 0) {
      r.done = true;
      outputs[r.index].finish_reason = "length";
    }

  try {
    // Prefill, in chunks when asked: every round takes the next piece of each unfinished prompt.
    // Only prompt tokens: once a prompt is cached its sampled tokens go through decode below.
    for (;;) {
      ForwardBatch batch;
      batch.mode = ForwardMode::Extend;
      std::vector<Running*> members;
      for (auto& r : running) {
        const int remaining = static_cast<int>(requests[r.index].input_ids.size()) - r.cached;
        if (r.done || remaining == 0) continue;
        const int n = options.chunked_prefill_size > 0 ? std::min(remaining, options.chunked_prefill_size) : remaining;
        add_extend(batch, memory, r, n);
        members.push_back(&r);
      }
      if (members.empty()) break;
      step(batch, members);
    }

    // Decode: one token per unfinished request per step.
    for (;;) {
      ForwardBatch batch;
      batch.mode = ForwardMode::Decode;
      std::vector<Running*> members;
      for (auto& r : running) {
        if (r.done) continue;
        add_extend(batch, memory, r, 1);
        members.push_back(&r);
      }
      if (members.empty()) break;
      step(batch, members);
    }
  } catch (...) {
    release_all();
    throw;
  }
  release_all();
  return outputs;
}

}  // namespace strata
