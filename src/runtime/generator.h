#pragma once
// Offline generation (`strata generate`, `strata perplexity`, bench-one-batch): an offline
// engine over the serving Scheduler, as SGLang's offline engine runs its server's scheduler.
// Every prompt is submitted at once, the scheduler is stepped until all are done, and the
// outputs come back in prompt order; so batching, chunked prefill, micro-batches, EOS and
// request validation are the server's, with no second copy to drift. Under a pipeline every
// stage runs this with the same prompts, and its scheduler in lockstep with the others'.
#include <string>
#include <vector>

#include "dist/transport.h"
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

// Wall time of one generate call. Prefill ends when every request has its first token; the
// decode tokens are those drawn after that.
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
  // > 0: prompt tokens per prefill pass (the scheduler's --chunked-prefill-size); 0: no limit.
  int chunked_prefill_size = 0;
  bool return_logits = false;
  // Scoring (`strata perplexity`): prefill passes return the logits of every prompt token (not
  // only each request's last) and each output gets the prompt's input_logprobs.
  bool return_input_logprobs = false;
  // Passes in flight, each over at most 1/M of the requests (SchedulerOptions::micro_batches).
  // 0: one per pipeline stage (1 in one process).
  int micro_batches = 0;
};

// Checks every request against the model before any process starts or the KV cache is sized
// (RequestError naming the prompt, the limit and the flag to change).
void validate_requests(const ModelConfig& config, int max_context_len,
                       const std::vector<GenerateRequest>& requests);

// Runs the requests to completion. `pipeline`: this process is one stage of a pipeline whose
// other stages run the same call (the outputs are complete, logits included, on the last
// stage; the others know the ids).
std::vector<GenerateOutput> generate(ModelRunner& runner,
                                     const std::vector<GenerateRequest>& requests,
                                     const GenerateOptions& options = {},
                                     GenerateStats* stats = nullptr, Transport* pipeline = nullptr);

// Slots needed to hold every request at its longest, given the page size.
int64_t kv_slots_needed(const std::vector<GenerateRequest>& requests, int page_size);

}  // namespace strata
