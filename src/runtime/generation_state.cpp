#include "runtime/generation_state.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/batch_builder.h"

namespace strata {

GenerationState::GenerationState(const ModelConfig& config, TokenMemory& memory, StatePool* states,
                                 const std::vector<GenerateRequest>& requests,
                                 const GenerateOptions& options)
    : config_(config),
      memory_(memory),
      states_(states),
      requests_(requests),
      options_(options),
      outputs_(requests.size()) {
  start_ = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    const int row = memory.req_to_token().alloc();
    if (row < 0) {
      release_all();
      throw Error(fmt::format("{} prompts exceed --max-running-requests {}", requests.size(),
                              memory.req_to_token().max_requests()));
    }
    const auto& req = requests[i];
    running_.push_back(Running{static_cast<int>(i),
                               row,
                               -1,
                               static_cast<int>(req.input_ids.size()),
                               req.input_ids,
                               0,
                               false,
                               {}});
    if (states_) {
      try {
        running_.back().state_slot = states_->alloc();
      } catch (...) {
        release_all();
        throw;
      }
    }
    if (req.sampling.max_new_tokens == 0) {
      running_.back().done = true;
      outputs_[i].finish_reason = "length";
    }
  }
  note_progress();
}

GenerationState::~GenerationState() {
  release_all();
}

void GenerationState::release_all() {
  for (auto& r : running_) {
    memory_.release(r.req_pool_idx, r.cached);
    if (r.state_slot >= 0) states_->free(r.state_slot);
  }
  running_.clear();
}

// Appends request r's tokens [cached, cached + n) to the batch, allocating their KV slots.
void GenerationState::add_extend(ForwardBatch& batch, Running& r, int n) {
  if (!append_extend(batch, memory_, r.req_pool_idx, r.state_slot, r.tokens, r.cached, n))
    throw Error(
        fmt::format("out of KV cache memory: request {} needs {} more slots; raise "
                    "--max-total-tokens or send fewer requests at once",
                    r.index, n));
  r.cached += n;
}

ForwardBatch GenerationState::next_batch(const std::vector<int>& group, std::vector<int>* members) {
  members->clear();
  ForwardBatch batch;
  const bool prefill =
      std::any_of(group.begin(), group.end(), [&](int i) { return running_[i].prefilling(); });
  batch.mode = prefill ? ForwardMode::Extend : ForwardMode::Decode;
  batch.return_all_logits = prefill && options_.return_input_logprobs;
  rows_.clear();
  for (int i : group) {
    Running& r = running_[i];
    if (r.done || (prefill && !r.prefilling())) continue;
    const int remaining = static_cast<int>(r.tokens.size()) - r.cached;
    STRATA_CHECK(remaining >= 1, "request {} has nothing to feed", i);
    const int chunk = options_.chunked_prefill_size;
    const int n = prefill && chunk > 0 ? std::min(remaining, chunk) : remaining;
    rows_.push_back(batch.return_all_logits ? Rows{batch.num_tokens(), n, r.cached}
                                            : Rows{static_cast<int>(members->size()), 1, r.cached});
    add_extend(batch, r, n);
    batch.sampling.push_back(sampling_row(requests_[r.index].sampling,
                                          static_cast<int>(outputs_[r.index].output_ids.size())));
    members->push_back(i);
  }
  return batch;
}

std::vector<int32_t> GenerationState::sample(const std::vector<int>& members,
                                             const Tensor& logits) {
  const int vocab = config_.vocab_size;
  std::vector<int32_t> tokens(members.size(), -1);
  for (size_t b = 0; b < members.size(); ++b) {
    Running& r = running_[members[b]];
    if (r.cached < static_cast<int>(r.tokens.size()))
      continue;  // mid-prompt: nothing to sample yet
    tokens[b] = sample_token(logits.row(rows_[b].last()), vocab, requests_[r.index].sampling,
                             static_cast<int>(outputs_[r.index].output_ids.size()));
  }
  return tokens;
}

bool GenerationState::is_stop(const SamplingParams& p, int token) const {
  return is_stop_token(p, config_.eos_token_ids, token);
}

void GenerationState::accept(const std::vector<int>& members, const std::vector<int32_t>& tokens,
                             const Tensor* logits) {
  STRATA_CHECK(tokens.size() == members.size(), "{} tokens for {} requests", tokens.size(),
               members.size());
  const int vocab = config_.vocab_size;
  const auto now = Clock::now();
  if (logits && options_.return_input_logprobs) record_input_logprobs(members, *logits);
  for (size_t b = 0; b < members.size(); ++b) {
    if (tokens[b] < 0) continue;
    Running& r = running_[members[b]];
    if (prefill_over_ && r.last_token_at != Clock::time_point{})
      intervals_.push_back(std::chrono::duration<double>(now - r.last_token_at).count());
    r.last_token_at = now;
    STRATA_CHECK(!r.done && r.cached == static_cast<int>(r.tokens.size()) && tokens[b] < vocab,
                 "token {} for request {} that cannot take one", tokens[b], r.index);
    const auto& p = requests_[r.index].sampling;
    auto& out = outputs_[r.index];
    out.output_ids.push_back(tokens[b]);
    if (options_.return_logits && logits) {
      const float* row = logits->row(rows_[b].last());
      out.logits.emplace_back(row, row + vocab);
    }
    r.tokens.push_back(tokens[b]);
    if (prefill_over_) ++decode_tokens_;
    if (is_stop(p, tokens[b])) {
      out.finish_reason = "stop";
      r.done = true;
    } else if (static_cast<int>(out.output_ids.size()) >= p.max_new_tokens) {
      out.finish_reason = "length";
      r.done = true;
    }
  }
  note_progress();
}

// Row j of a member's logits predicts its token prefix + j + 1; those still in the prompt are
// scored. The log-softmax is summed in double: perplexity adds up thousands of these.
void GenerationState::record_input_logprobs(const std::vector<int>& members, const Tensor& logits) {
  const int vocab = config_.vocab_size;
  STRATA_CHECK(logits.dim(1) == vocab, "logits have {} columns for a vocabulary of {}",
               logits.dim(1), vocab);
  for (size_t b = 0; b < members.size(); ++b) {
    const Running& r = running_[members[b]];
    const Rows& rows = rows_[b];
    STRATA_CHECK(rows.last() < logits.dim(0), "logits have {} rows; request {} needs row {}",
                 logits.dim(0), r.index, rows.last());
    auto& out = outputs_[r.index].input_logprobs;
    for (int j = 0; j < rows.count; ++j) {
      const int target = rows.prefix + j + 1;
      if (target >= r.prompt_len) break;
      const float* row = logits.row(rows.first + j);
      const float mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      out.push_back(static_cast<double>(row[r.tokens[target]]) - mx - std::log(sum));
    }
  }
}

void GenerationState::note_progress() {
  if (!prefill_over_ && std::none_of(running_.begin(), running_.end(),
                                     [](const Running& r) { return r.prefilling(); })) {
    prefill_over_ = true;
    prefilled_ = Clock::now();
  }
  if (!finished_ && all_done()) {
    finished_ = true;
    end_ = Clock::now();
  }
}

bool GenerationState::all_done() const {
  return std::all_of(running_.begin(), running_.end(), [](const Running& r) { return r.done; });
}

GenerateStats GenerationState::stats() const {
  GenerateStats s;
  const auto end = finished_ ? end_ : Clock::now();
  const auto prefilled = prefill_over_ ? prefilled_ : end;
  s.prefill_s = std::chrono::duration<double>(prefilled - start_).count();
  s.decode_s = std::chrono::duration<double>(end - prefilled).count();
  s.decode_tokens = decode_tokens_;
  if (!intervals_.empty()) {
    std::vector<double> sorted = intervals_;
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    s.itl_median_s = sorted[sorted.size() / 2];
  }
  return s;
}

}  // namespace strata
