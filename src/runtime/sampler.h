#pragma once
// Token sampling from one row of logits: greedy (temperature 0), or temperature with top-k
// and top-p (nucleus) filtering, driven by a per-request seeded generator so that a seed
// reproduces its output whatever else is in the batch.
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace strata {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  uint64_t seed = 0;
  int max_new_tokens = 16;
  bool stop_at_eos = true;
  std::vector<int> stop_token_ids;

  // Throws RequestError for values out of range (temperature < 0, top_p outside (0, 1], ...).
  void validate() const;
};

int sample_token(const float* logits, int vocab, const SamplingParams& p, std::mt19937_64& rng);

// log-softmax of the model's own distribution (before temperature and filtering) at `token`,
// and the `top_n` most likely tokens with theirs, most likely first (OpenAI's logprobs).
struct TokenLogprob {
  int token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int, float>> top;
};
TokenLogprob token_logprob(const float* logits, int vocab, int token, int top_n);

}  // namespace strata
