#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "ops/logprobs.h"

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

void append_logit_edits(std::vector<LogitEdit>& out, int row, int vocab, const SamplingParams& p,
                        const TokenCounts& counts, const std::vector<int>& eos_ids) {
  if (!p.adjusts_logits()) return;
  // One edit per token: the controls that touch it merge into its bias, repetition and shift.
  std::unordered_map<int, LogitEdit> edits;
  auto edit = [&](int token) -> LogitEdit* {
    if (token < 0 || token >= vocab) return nullptr;
    auto [it, fresh] = edits.try_emplace(token);
    if (fresh) it->second.row = row, it->second.token = token;
    return &it->second;
  };
  for (const auto& [token, bias] : p.logit_bias)
    if (LogitEdit* e = edit(token)) e->bias += bias;
  if (counts.output_tokens() < p.min_new_tokens) {
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    if (p.stop_at_eos)
      for (int t : eos_ids)
        if (LogitEdit* e = edit(t)) e->shift = kBanned;
    for (int t : p.stop_token_ids)
      if (LogitEdit* e = edit(t)) e->shift = kBanned;
  }
  if (p.repetition_penalty != 1.0f)
    for (int t : counts.seen())
      if (LogitEdit* e = edit(t)) e->repetition = p.repetition_penalty;
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f)
    for (const auto& [t, n] : counts.output())
      if (LogitEdit* e = edit(t))
        e->shift -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
  // In token order, so that a pass's edit list does not depend on hash order.
  const size_t first = out.size();
  for (const auto& [_, e] : edits) out.push_back(e);
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const LogitEdit& a, const LogitEdit& b) { return a.token < b.token; });
}

void adjust_logits(float* logits, int vocab, const SamplingParams& p, const TokenCounts& counts,
                   const std::vector<int>& eos_ids) {
  std::vector<LogitEdit> edits;
  append_logit_edits(edits, 0, vocab, p, counts, eos_ids);
  std::vector<int32_t> packed(edits.size() * kLogitEditInts);
  for (size_t i = 0; i < edits.size(); ++i) edits[i].pack(packed.data() + i * kLogitEditInts);
  apply_logit_edits(logits, vocab, 1, vocab, packed.data(), static_cast<int64_t>(edits.size()));
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
  const int n = std::clamp(top_n, 0, vocab);
  std::vector<float> row(logprob_row_width(n));
  row_logprobs(logits, vocab, token, n, row.data());
  return token_logprob_from_row(row.data(), token, n);
}

TokenLogprob token_logprob_from_row(const float* row, int token, int top_n) {
  TokenLogprob out;
  out.token = token;
  out.logprob = row[0];
  for (int i = 0; i < top_n; ++i)
    out.top.emplace_back(static_cast<int>(row[kLogprobHead + 2 * i]),
                         row[kLogprobHead + 2 * i + 1]);
  return out;
}

}  // namespace strata
