// The scheduler's side of one request's draw: what the pass needs to draw its next token
// (sampling row, logit edits, grammar mask, logprobs), and what is done with the token drawn
// (stop tokens, the grammar, stop strings, the length limit).
#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "grammar/compiled_grammar.h"
#include "ops/logprobs.h"
#include "runtime/batch_builder.h"
#include "runtime/pipeline_pass.h"
#include "runtime/scheduler.h"
#include "runtime/scheduler_request.h"

namespace strata {

namespace {

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

void Scheduler::add_draw(ForwardBatch& batch, const Req& r, ModelRunner::LateMasks& late) {
  const ServeRequest& q = r.request;
  const int b = static_cast<int>(batch.sampling.size());
  batch.sampling.push_back(sampling_row(q.sampling, r.generated()));
  if (r.prefilling()) return;  // mid-prompt: its draw is not used
  append_logit_edits(batch.logit_edits, b, runner_.config().vocab_size, q.sampling, r.counts,
                     options_.eos_token_ids);
  if (r.matcher && mask_worker_) {
    late.rows.push_back(b);
    late_reqs_.push_back(&r);
  } else if (r.matcher) {
    const size_t words = static_cast<size_t>(token_mask_words(runner_.config().vocab_size));
    batch.mask_rows.push_back(b);
    batch.token_masks.resize(batch.token_masks.size() + words);
    const auto start = std::chrono::steady_clock::now();
    grammar_mask(r, batch.token_masks.data() + batch.token_masks.size() - words);
    const double ms = elapsed_ms(start);
    totals_.grammar_mask_ms += ms;
    totals_.grammar_mask_exposed_ms += ms;  // the pass waits for all of it
  }
  batch.top_logprobs = std::max(batch.top_logprobs, q.top_logprobs);
  if (q.return_logits) batch.raw_logit_rows.push_back(b);
}

// Runs on the scheduler thread, or on mask_worker_ while the pass's forward runs: it reads r's
// matcher (fill_mask changes only the grammar's caches, under the grammar's mutex), r's
// sampling settings and options_, and writes `out` alone (mask_worker.h: why that is safe).
void Scheduler::grammar_mask(const Req& r, uint64_t* out) const {
  grammar::GrammarMatcher& m = *r.matcher;
  const SamplingParams& p = r.request.sampling;
  const int vocab = runner_.config().vocab_size;
  const int64_t words = token_mask_words(vocab);
  // The grammar's vocabulary is the tokenizer's; ids beyond it (padding rows of the LM head)
  // are never allowed.
  std::vector<uint32_t> bits(static_cast<size_t>(words) * 2, 0);
  const size_t grammar_words = (static_cast<size_t>(m.vocabulary_size()) + 31) / 32;
  if (grammar_words <= bits.size()) {
    m.fill_mask(std::span<uint32_t>(bits.data(), grammar_words));
  } else {
    std::vector<uint32_t> full(grammar_words);
    m.fill_mask(full);
    std::copy_n(full.begin(), bits.size(), bits.begin());
  }
  const bool any = std::any_of(bits.begin(), bits.end(), [](uint32_t w) { return w != 0; });
  // Stop tokens once the grammar accepts; also if nothing else is left (a vocabulary that
  // cannot spell the rest), so that the request ends instead of drawing a banned token.
  if (m.can_finish() || !any) {
    auto allow = [&](int id) {
      if (id >= 0 && id < vocab) bits[id >> 5] |= uint32_t{1} << (id & 31);
    };
    if (p.stop_at_eos)
      for (int id : options_.eos_token_ids) allow(id);
    for (int id : p.stop_token_ids) allow(id);
  }
  for (int64_t w = 0; w < words; ++w)
    out[w] = static_cast<uint64_t>(bits[2 * w]) | (static_cast<uint64_t>(bits[2 * w + 1]) << 32);
}

ModelRunner::SampledTokens Scheduler::run_sampled(const ForwardBatch& batch,
                                                  ModelRunner::LateMasks& late, bool* drawn_here) {
  *drawn_here = true;
  if (pipeline_) {  // no grammars: validate()
    ModelRunner::SampledTokens drawn;
    *drawn_here = launch_pipelined_pass(runner_, *pipeline_, batch, answer_rank_, &drawn,
                                        &totals_.pipeline_wait_s);
    return drawn;
  }
  if (late.rows.empty()) {
    ModelRunner::SampledTokens drawn = runner_.forward_sampled(batch);
    // Tensor-parallel ranks without stages: the failure tests' faults act here.
    const Communicator* tp = runner_.options().tensor_parallel;
    if (tp && tp->size() > 1) maybe_inject_fault(0, runner_);
    return drawn;
  }
  const size_t words = static_cast<size_t>(token_mask_words(runner_.config().vocab_size));
  late_masks_.assign(late_reqs_.size() * words, 0);  // sized before the job: it never reallocates
  mask_worker_->start([this, words] {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < late_reqs_.size(); ++i)
      grammar_mask(*late_reqs_[i], late_masks_.data() + i * words);
    late_job_ms_ = elapsed_ms(start);
  });
  late.wait = [this]() -> const std::vector<uint64_t>& {
    const auto start = std::chrono::steady_clock::now();
    mask_worker_->wait();
    totals_.grammar_mask_exposed_ms += elapsed_ms(start);
    totals_.grammar_mask_ms += late_job_ms_;
    return late_masks_;
  };
  try {
    return runner_.forward_sampled(batch, late);
  } catch (...) {
    // The requests are failed next: the job must be done with them first.
    mask_worker_->drain();
    throw;
  }
}

// Jump-forward, SGLang's: when the grammar forces the bytes after `token` (a fixed key, the
// `":` after it), the tokenizer re-encodes token's bytes + the forced bytes, and those ids
// replace `token` (re-aligned at the boundary: token's bytes may merge with the forced ones
// into other tokens). `token` has no KV yet (the pass drew it), so replacing it costs nothing;
// tokens before it are kept as they are. The ids are used only if they spell exactly those
// bytes and the grammar takes each; at most what max_new_tokens leaves. Requests with
// logprobs or raw logits never jump: the ids after the first were not drawn, they have none.
std::vector<int> Scheduler::jump_forward(const Req& r, int token) const {
  const ServeRequest& q = r.request;
  if (!options_.enable_jump_forward || !retokenize_ || !r.matcher || q.top_logprobs >= 0 ||
      q.return_logits)
    return {token};
  grammar::GrammarMatcher after = *r.matcher;
  if (!after.accept_token(token)) return {token};  // accept() ends the request
  // Long enough for any key of a schema; a longer forced run continues at the next draw.
  constexpr size_t kMaxForcedBytes = 256;
  const std::string forced = after.forced_bytes(kMaxForcedBytes);
  if (forced.empty()) return {token};
  const std::string text = after.vocabulary().bytes(token) + forced;
  std::vector<int> ids;
  try {
    ids = retokenize_(text);
  } catch (const RequestError&) {
    return {token};  // not UTF-8: the drawn token ends inside a character
  }
  std::string spelled;
  for (int id : ids) {
    if (id < 0 || id >= after.vocabulary_size() || !after.vocabulary().usable(id)) return {token};
    spelled += after.vocabulary().bytes(id);
  }
  if (ids.empty() || spelled != text) return {token};  // a normalizing tokenizer, a prefix space
  const size_t room = static_cast<size_t>(q.sampling.max_new_tokens - r.generated());
  if (ids.size() > room) ids.resize(room);
  grammar::GrammarMatcher check = *r.matcher;
  for (int id : ids)
    if (!check.accept_token(id)) return {token};
  return ids;
}

void Scheduler::take_draw(Req& r, int b, const ForwardBatch& batch,
                          ModelRunner::SampledTokens& drawn) {
  const ServeRequest& q = r.request;
  const int token = drawn.ids[b];
  if (q.top_logprobs >= 0 && records_draws()) {
    // The pass computed the batch's largest top_logprobs; this request's are the first ones.
    const float* row =
        drawn.logprobs.data() + static_cast<size_t>(b) * logprob_row_width(batch.top_logprobs);
    r.out.logprobs.push_back(token_logprob_from_row(row, token, q.top_logprobs));
  }
  if (q.return_logits && records_draws()) {
    // Raw rows come in the order of batch.raw_logit_rows, which names the members asking.
    const auto& asking = batch.raw_logit_rows;
    const auto row = std::find(asking.begin(), asking.end(), b) - asking.begin();
    r.out.logits.push_back(std::move(drawn.raw_logits.at(static_cast<size_t>(row))));
  }
  int64_t accepted = 0;
  for (int id : jump_forward(r, token)) {
    accept(r, id);
    ++accepted;
    if (r.finished) break;
  }
  totals_.jump_forward_tokens += accepted - 1;
  if (r.finished) return;
  // More than one token without KV: the next pass computes them as an extend, and draws from
  // the last one's logits (the same path as a prompt's last chunk).
  if (r.tokens.size() > static_cast<size_t>(r.cached) + 1)
    r.prefill_end = static_cast<int>(r.tokens.size());
}

std::vector<Scheduler::PromptRow> Scheduler::ask_prompt_logits(ForwardBatch& batch,
                                                               const std::vector<Req*>& members) {
  std::vector<PromptRow> rows;
  const std::vector<int> offsets = batch.token_offsets();
  for (size_t b = 0; b < members.size(); ++b) {
    Req& r = *members[b];
    if (!r.wants_prompt_logits()) continue;
    // Position p's logits predict token p + 1: the rows of the chunk's positions before the
    // last prompt token (whose logits draw the first output token) still owed.
    const int begin = batch.prefix_lens[b];
    const int end = std::min(batch.seq_len(static_cast<int>(b)), r.prompt_len - 1);
    for (int p = std::max(begin, r.prompt_logprob_next - 1); p < end; ++p) {
      batch.logits_rows.push_back(offsets[b] + p - begin);
      rows.push_back({static_cast<int>(b), p});
    }
  }
  // Every token of the pass then gets its logits row (the model computes all or only the
  // last ones): a cost only passes with prompt logprobs pay.
  batch.return_all_logits = !rows.empty();
  return rows;
}

void Scheduler::take_prompt_logprobs(const std::vector<PromptRow>& rows,
                                     const std::vector<Req*>& members,
                                     const ModelRunner::SampledTokens& drawn) {
  const int vocab = runner_.config().vocab_size;
  for (size_t i = 0; i < rows.size(); ++i) {
    Req* r = members[static_cast<size_t>(rows[i].member)];
    if (!r) continue;  // aborted while its pass was in flight
    const int token = r->tokens[rows[i].position + 1];
    // Every stage moves on (admission reads it); the stage that answers records the values.
    if (records_draws())
      r->out.prompt_logprobs.push_back(token_logprob(drawn.token_logits.at(i).data(), vocab, token,
                                                     r->request.prompt_top_logprobs));
    r->prompt_logprob_next = rows[i].position + 2;
  }
}

void Scheduler::accept(Req& r, int token) {
  const ServeRequest& q = r.request;
  if (q.sampling.adjusts_logits()) r.counts.add_output(token);
  r.tokens.push_back(token);
  r.out.token_ids.push_back(token);
  ++totals_.generated_tokens;
  if (is_stop_token(q.sampling, options_.eos_token_ids, token)) {
    r.out.matched_stop_token = token;
    return finish(r, "stop");
  }
  if (r.matcher) {
    // The mask allowed only what the grammar takes; a refusal means every allowed token was
    // banned by the request's own edits (a stop token under min_tokens where only stopping
    // is left): end the request rather than emit text outside the grammar.
    if (!r.matcher->accept_token(token)) {
      r.tokens.pop_back();
      r.out.token_ids.pop_back();
      log::warning("request {}: no token the grammar allows could be drawn; ending it", r.id);
      return finish(r, "abort");
    }
    // A complete match that cannot grow: done, without a pass to draw the stop token.
    if (r.matcher->must_finish()) return finish(r, "stop");
  }
  // Before the length check: text cut at a stop string ends with "stop" even on the last token.
  if (matches_stop_string(r, token)) return finish(r, "stop");
  if (r.generated() >= q.sampling.max_new_tokens) return finish(r, "length");
}

// Feeds `token` to the request's text stream; true when the text now holds a stop string
// (recorded in the output). Only the new text and the tail before it are searched, so a long
// output costs no more per token than a short one.
bool Scheduler::matches_stop_string(Req& r, int token) {
  const ServeRequest& q = r.request;
  if (q.stop_strings.empty()) return false;
  if (!r.text) r.text = make_text_stream_(q.skip_special_tokens);
  r.text_tail += r.text->step(token);
  // As vLLM: no stop before min_new_tokens (the text still counts as the tail for later).
  const bool may_stop = r.generated() >= q.sampling.min_new_tokens;
  size_t longest = 0;
  for (const auto& s : q.stop_strings) {
    longest = std::max(longest, s.size());
    if (may_stop && !s.empty() && r.text_tail.find(s) != std::string::npos) {
      r.out.matched_stop_string = s;
      return true;
    }
  }
  const size_t keep = longest > 0 ? longest - 1 : 0;
  if (r.text_tail.size() > keep) r.text_tail.erase(0, r.text_tail.size() - keep);
  return false;
}
}  // namespace strata
