#pragma once
// Offline generation for a fixed set of prompts: all of them prefilled together (optionally
// in chunks), then decoded as one batch until each stops. This is what `strata generate`
// and `bench-one-batch` run; the server's scheduler (continuous batching) builds on the same
// batch construction.
#include <string>
#include <vector>

#include "runtime/model_runner.h"
#include "runtime/sampler.h"

namespace strata {

struct GenerateRequest {
  std::vector<int> input_ids;
  SamplingParams sampling;
};

struct GenerateOutput {
  std::vector<int> output_ids;
  std::vector<std::vector<float>> logits;  // with return_logits: the row that chose each output
  std::string finish_reason;               // "length" | "stop"
  // With return_input_logprobs: log p(prompt[k] | prompt[0..k)) for k = 1 .. prompt length - 1
  // (the first prompt token has nothing before it), from the prefill passes' logits.
  std::vector<double> input_logprobs;
};

// Wall time of one generate call. Prefill ends when no request still reads its prompt; the
// decode tokens are those sampled after that.
struct GenerateStats {
  double prefill_s = 0, decode_s = 0;
  int64_t decode_tokens = 0;
  double wait_s = 0;  // pipelined: time this stage spent waiting on others (hand-overs, ids)
  // Tensor-parallel: time in the group's collectives (all-reduces, the logits' all-gather).
  double tp_collective_s = 0;
  int64_t tp_collectives = 0;
  // Median time between two consecutive tokens of one request while decoding (the time per
  // decode step as a request sees it; robust to the few first steps that warm up).
  double itl_median_s = 0;
  double decode_tokens_per_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0.0; }
};

struct GenerateOptions {
  int chunked_prefill_size = 0;  // > 0: feed each prompt in pieces of at most this many tokens
  bool return_logits = false;
  // Scoring (`strata perplexity`): prefill passes return the logits of every prompt token (not
  // only each request's last) and each output gets the prompt's input_logprobs.
  bool return_input_logprobs = false;
  // The requests split into this many groups that take turns through the model, each its own
  // batch (as pipeline micro-batches do). 0: one group; pipelined: one per stage.
  int micro_batches = 0;
};

// Checks every request against the model before any work starts (RequestError on failure).
void validate_requests(const ModelRunner& runner, const std::vector<GenerateRequest>& requests);
// The same checks without a runner (a launcher checks requests before starting processes).
void validate_requests(const ModelConfig& config, int max_context_len,
                       const std::vector<GenerateRequest>& requests);

std::vector<GenerateOutput> generate(ModelRunner& runner,
                                     const std::vector<GenerateRequest>& requests,
                                     const GenerateOptions& options = {},
                                     GenerateStats* stats = nullptr);

// Request indices [0, n) cut into `parts` contiguous groups whose sizes differ by at most one.
std::vector<std::vector<int>> split_into_micro_batches(int n, int parts);

// Slots needed to hold every request at its longest, given the page size.
int64_t kv_slots_needed(const std::vector<GenerateRequest>& requests, int page_size);

}  // namespace strata
