#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace strata {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw RequestError(fmt::format("temperature must be >= 0, got {}", temperature));
  if (top_k < 0)
    throw RequestError(fmt::format("top_k must be >= 0 (0 disables it), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw RequestError(fmt::format("top_p must be in (0, 1], got {}", top_p));
  if (max_new_tokens < 0)
    throw RequestError(fmt::format("max_new_tokens must be >= 0, got {}", max_new_tokens));
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    throw RequestError(fmt::format("min_p must be in [0, 1], got {}", min_p));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    throw RequestError(
        fmt::format("presence_penalty must be in [-2, 2], got {}", presence_penalty));
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    throw RequestError(
        fmt::format("frequency_penalty must be in [-2, 2], got {}", frequency_penalty));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    throw RequestError(
        fmt::format("repetition_penalty must be > 0 (1 disables it), got {}", repetition_penalty));
  if (min_new_tokens < 0 || min_new_tokens > max_new_tokens)
    throw RequestError(fmt::format("min_tokens must be in 0..max_tokens ({}), got {}",
                                   max_new_tokens, min_new_tokens));
  for (const auto& [token, bias] : logit_bias)
    if (!(bias >= -100.0f && bias <= 100.0f))
      throw RequestError(
          fmt::format("logit_bias of token {} must be in [-100, 100], got {}", token, bias));
}

bool SamplingParams::adjusts_logits() const {
  return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
         min_new_tokens > 0 || !logit_bias.empty();
}

TokenCounts::TokenCounts(const std::vector<int>& prompt) : seen_(prompt.begin(), prompt.end()) {}

void TokenCounts::add_output(int token) {
  ++output_[token];
  seen_.insert(token);
  ++output_tokens_;
}

int TokenCounts::output_count(int token) const {
  const auto it = output_.find(token);
  return it == output_.end() ? 0 : it->second;
}

void adjust_logits(float* logits, int vocab, const SamplingParams& p, const TokenCounts& counts,
                   const std::vector<int>& eos_ids) {
  auto valid = [vocab](int t) { return t >= 0 && t < vocab; };
  for (const auto& [token, bias] : p.logit_bias)
    if (valid(token)) logits[token] += bias;
  if (counts.output_tokens() < p.min_new_tokens) {
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    if (p.stop_at_eos)
      for (int t : eos_ids)
        if (valid(t)) logits[t] = kBanned;
    for (int t : p.stop_token_ids)
      if (valid(t)) logits[t] = kBanned;
  }
  if (p.repetition_penalty != 1.0f)
    for (int t : counts.seen())
      if (valid(t))
        logits[t] =
            logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f)
    for (const auto& [t, n] : counts.output())
      if (valid(t)) logits[t] -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
}

SamplingRow sampling_row(const SamplingParams& p, int step) {
  SamplingRow row;
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.set_seed(p.seed);
  row.step = step;
  return row;
}

int sample_token(const float* logits, int vocab, const SamplingParams& p, int step) {
  return sample_row(logits, vocab, sampling_row(p, step));
}

TokenLogprob token_logprob(const float* logits, int vocab, int token, int top_n) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const double log_z = max_logit + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<float>(logits[token] - log_z);
  const int k = std::clamp(top_n, 0, vocab);
  std::vector<int> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < k; ++i)
    out.top.emplace_back(idx[i], static_cast<float>(logits[idx[i]] - log_z));
  return out;
}

}  // namespace strata
