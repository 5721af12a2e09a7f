#pragma once
// GenerationState: the requests of one generate call, seen from one process: what each has
// cached and generated, which are done, and the batch construction over them. The plain
// generate loop (generator.cpp) and the pipelined one (pipeline_generator.cpp) both drive it;
// under pipeline parallelism every stage keeps an identical copy, so each builds the same
// batches against its own token memory and only hidden states and sampled ids travel.
#include <chrono>
#include <cstdint>
#include <vector>

#include "cache/state_pool.h"
#include "runtime/generator.h"

namespace strata {

class GenerationState {
 public:
  // Takes a row of `memory` for every request, and a slot of `states` when the model has
  // recurrent layers (Error when there are not enough; nothing is kept then).
  GenerationState(const ModelConfig& config, TokenMemory& memory, StatePool* states,
                  const std::vector<GenerateRequest>& requests, const GenerateOptions& options);
  ~GenerationState();  // gives the rows and slots back
  GenerationState(const GenerationState&) = delete;
  GenerationState& operator=(const GenerationState&) = delete;

  int num_requests() const { return static_cast<int>(running_.size()); }

  // The next forward pass over the requests in `group` (indices into the requests): the next
  // prompt piece of each one still reading its prompt (Extend), or, once none is, one token
  // for each unfinished one (Decode). Prefill goes first, as in SGLang's scheduler; decoding
  // members wait meanwhile. `members` gets the request index of each batch entry; an empty
  // batch means the group is done.
  ForwardBatch next_batch(const std::vector<int>& group, std::vector<int>* members);

  // Last stage: a token for each member that has read its whole prompt, sampled from its row
  // of `logits`; -1 for a member that is still mid-prompt.
  std::vector<int32_t> sample(const std::vector<int>& members, const Tensor& logits);

  // Every stage: records the tokens `sample` chose. `logits` (the last stage's) are kept with
  // each token when the options ask for them; other stages pass null.
  void accept(const std::vector<int>& members, const std::vector<int32_t>& tokens,
              const Tensor* logits);

  bool all_done() const;
  // Whether request `i` has its whole sequence in the cache, so its next token can be sampled.
  bool ready_to_sample(int i) const {
    return !running_[i].done && running_[i].cached == static_cast<int>(running_[i].tokens.size());
  }
  std::vector<GenerateOutput> outputs() const { return outputs_; }
  GenerateStats stats() const;

 private:
  struct Running {
    int index;         // into requests / outputs
    int req_pool_idx;  // row in the ReqToTokenPool
    int state_slot;    // slot in the recurrent-state pool; -1 without recurrent layers
    int prompt_len;
    std::vector<int> tokens;  // prompt + generated so far
    int cached = 0;           // tokens whose KV is in the cache
    bool done = false;
    std::chrono::steady_clock::time_point last_token_at{};  // when its last token was accepted
    bool prefilling() const { return !done && cached < prompt_len; }
  };
  // Where each member of the batch next_batch built last sits in that pass's logits: its
  // first row, its new tokens, and the tokens cached before them. One row per member unless
  // the pass returns all logits (return_input_logprobs). sample() and accept() follow the
  // next_batch() of their pass on the stage that has logits (the last), so they read these.
  struct Rows {
    int first = 0, count = 1, prefix = 0;
    int last() const { return first + count - 1; }  // the row its next token is sampled from
  };
  std::vector<Rows> rows_;
  void add_extend(ForwardBatch& batch, Running& r, int n);
  void release_all();
  void record_input_logprobs(const std::vector<int>& members, const Tensor& logits);
  bool is_stop(const SamplingParams& p, int token) const;
  void note_progress();

  const ModelConfig& config_;
  TokenMemory& memory_;
  StatePool* states_;
  const std::vector<GenerateRequest>& requests_;
  GenerateOptions options_;
  std::vector<Running> running_;
  std::vector<GenerateOutput> outputs_;

  // Timing: prefill ends when no request reads its prompt any more; tokens sampled after that
  // are decode tokens.
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_, prefilled_, end_;
  bool prefill_over_ = false, finished_ = false;
  int64_t decode_tokens_ = 0;
  std::vector<double> intervals_;  // seconds between consecutive decode tokens of a request
};

}  // namespace strata
