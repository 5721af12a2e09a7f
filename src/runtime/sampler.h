#pragma once
// Token sampling from one row of logits, with one definition of every sampling control the
// server offers. Per request: the parameters (SamplingParams) and the token counts its
// penalties read (TokenCounts, updated as tokens are chosen). Per step: adjust_logits() turns
// the model's logits into the request's (logit_bias, min_new_tokens, repetition / frequency /
// presence penalties, in vLLM's order), then sample_token() picks greedily (temperature 0)
// or at temperature after top-k, top-p and min-p filtering, with a random number that is a
// function of the request's seed and the output position alone, so that a seed reproduces
// its output whatever else is in the batch and on whichever device draws (ops/sampling.h:
// requests without adjustments draw on the device, in one kernel over the batch).
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ops/logit_edits.h"
#include "ops/sampling.h"

namespace strata {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off; else drop tokens less likely than min_p x the most likely
  // OpenAI's: subtracted from a token's logit, `frequency` x its count in the output so far,
  // `presence` once if it occurs there. In [-2, 2].
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  // Hugging Face's (CTRL): a token of the prompt or the output has a positive logit divided
  // by it, a negative one multiplied. 1 = off; > 0.
  float repetition_penalty = 1.0f;
  // Stop tokens (EOS unless ignored, stop_token_ids) cannot be chosen before this many
  // output tokens.
  int min_new_tokens = 0;
  std::vector<std::pair<int, float>> logit_bias;  // (token, added to its logit), in [-100, 100]
  uint64_t seed = 0;
  int max_new_tokens = 16;
  bool stop_at_eos = true;
  std::vector<int> stop_token_ids;

  // Throws RequestError for values out of range (temperature < 0, top_p outside (0, 1], ...).
  // Token ids (logit_bias, stop_token_ids) are checked against the model by the scheduler.
  void validate() const;
  // Whether adjust_logits() changes anything (if not, the model's row is sampled as it is).
  bool adjusts_logits() const;
};

// What the penalties of one request read: which tokens its prompt and output hold, and how
// often each occurs in the output.
class TokenCounts {
 public:
  TokenCounts() = default;
  explicit TokenCounts(const std::vector<int>& prompt);
  void add_output(int token);
  int output_tokens() const { return output_tokens_; }
  int output_count(int token) const;
  const std::unordered_map<int, int>& output() const { return output_; }
  const std::unordered_set<int>& seen() const { return seen_; }  // prompt and output

 private:
  std::unordered_map<int, int> output_;
  std::unordered_set<int> seen_;
  int output_tokens_ = 0;
};

// The changes a request's controls make to its logits row `row` for its next draw, as logit
// edits (ops/logit_edits.h; at most one per token, appended to `out`): logit_bias added; stop
// tokens (eos_ids when p.stop_at_eos, and p.stop_token_ids) banned while fewer than
// min_new_tokens are out; then the repetition penalty over prompt and output tokens, and the
// frequency and presence penalties over output tokens. O(distinct tokens seen), not O(vocab).
void append_logit_edits(std::vector<LogitEdit>& out, int row, int vocab, const SamplingParams& p,
                        const TokenCounts& counts, const std::vector<int>& eos_ids);
// The same edits applied to one row of `vocab` logits on the host, in place.
void adjust_logits(float* logits, int vocab, const SamplingParams& p, const TokenCounts& counts,
                   const std::vector<int>& eos_ids);

// How a request with `p` draws its output token number `step` (0 for the first), as the
// sampling rule of every device takes it (ops/sampling.h).
SamplingRow sampling_row(const SamplingParams& p, int step);
// The draw on the host, from logits already adjusted: sample_row(sampling_row(p, step)).
int sample_token(const float* logits, int vocab, const SamplingParams& p, int step);

// log-softmax of the model's own distribution (before temperature and filtering) at `token`,
// and the `top_n` most likely tokens with theirs, most likely first (OpenAI's logprobs).
struct TokenLogprob {
  int token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int, float>> top;
};
TokenLogprob token_logprob(const float* logits, int vocab, int token, int top_n);
// The same from a pass's row of logprobs (ops/logprobs.h layout, `top_n` pairs).
TokenLogprob token_logprob_from_row(const float* row, int token, int top_n);

}  // namespace strata
