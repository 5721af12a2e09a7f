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
};

struct GenerateOptions {
  int chunked_prefill_size = 0;  // > 0: feed each prompt in pieces of at most this many tokens
  bool return_logits = false;
};

// Checks every request against the model before any work starts (RequestError on failure).
void validate_requests(const ModelRunner& runner, const std::vector<GenerateRequest>& requests);

std::vector<GenerateOutput> generate(ModelRunner& runner, const std::vector<GenerateRequest>& requests,
                                     const GenerateOptions& options = {});

// Slots needed to hold every request at its longest, given the page size.
int64_t kv_slots_needed(const std::vector<GenerateRequest>& requests, int page_size);

}  // namespace strata
