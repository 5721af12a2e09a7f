#include "runtime/scheduler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "grammar/compiled_grammar.h"
#include "model/json_util.h"
#include "ops/logprobs.h"
#include "runtime/batch_builder.h"

namespace strata {

struct Scheduler::Req {
  uint64_t id = 0;
  ServeRequest request;
  std::vector<int> tokens;  // prompt + generated so far
  int prompt_len = 0;
  int row = -1;                        // ReqToTokenPool row while admitted
  int cached = 0;                      // tokens whose KV is stored
  int prefill_end = 0;                 // cached must reach this before the next token is sampled
  int state_slot = -1;                 // recurrent-state slot while admitted (hybrid models)
  int track_slot = -1;                 // the state after the last page boundary decoded past
  int track_len = 0;                   // ... and that boundary (pages > 1, hybrid, cache on)
  RadixCache::Node* locked = nullptr;  // the prefix-cache path this request reads
  uint64_t admitted_at = 0;            // admission order: the newest is retracted first
  bool admitted_before = false;
  int cached_tokens = 0;  // prompt tokens the prefix cache served at the first admission
  TokenCounts counts;     // what its penalties read (kept only when it has any)
  RequestOutput out;      // accumulated since the last output was taken
  bool finished = false;
  // Failed mid-pass: its KV beyond the last good pass may be unwritten, so none is cached.
  bool failed = false;
  // Sent back to the queue by a retraction, when completions_ was this: it waits for another
  // request to finish before it is admitted again.
  std::optional<uint64_t> retracted_at;
  // Stop strings: the output's text stream, and the end of its text that a stop string
  // completed by a later token could still begin in.
  std::unique_ptr<TextStream> text;
  std::string text_tail;
  std::unique_ptr<grammar::GrammarMatcher> matcher;  // with a grammar: where its output is

  int generated() const { return static_cast<int>(tokens.size()) - prompt_len; }
  bool prefilling() const { return cached < prefill_end; }
};

Scheduler::Scheduler(ModelRunner& runner, const SchedulerOptions& options)
    : runner_(runner),
      options_(options),
      memory_(runner.memory()),
      states_(runner.state_pool()),
      page_size_(memory_.allocator().page_size()),
      new_token_ratio_(options.init_new_token_ratio) {
  if (!options.disable_radix_cache)
    cache_ = std::make_unique<RadixCache>(
        memory_.allocator(), states_,
        memory_.has_window_space() ? &memory_.window_allocator() : nullptr, memory_.window());
  extra_buffer_ = runner.mamba_radix_cache_strategy() == "extra_buffer";
  track_interval_ = runner.options().mamba_track_interval;
  if (caches_states() && extra_buffer_ &&
      (track_interval_ < 1 || track_interval_ % page_size_ != 0))
    fail(
        "--mamba-track-interval {} is not a positive multiple of --page-size {}: state "
        "checkpoints must fall on page boundaries of the prefix cache",
        track_interval_, page_size_);
}

Scheduler::~Scheduler() = default;

void Scheduler::validate(const ServeRequest& r) const {
  const int vocab = runner_.config().vocab_size;
  if (r.input_ids.empty()) throw RequestError("the prompt is empty: give at least one token");
  for (size_t j = 0; j < r.input_ids.size(); ++j)
    if (r.input_ids[j] < 0 || r.input_ids[j] >= vocab)
      throw RequestError(
          fmt::format("input id {} at position {} is outside the vocabulary "
                      "(valid ids are 0..{})",
                      r.input_ids[j], j, vocab - 1));
  r.sampling.validate();
  for (int id : r.sampling.stop_token_ids)
    if (id < 0 || id >= vocab)
      throw RequestError(
          fmt::format("stop token id {} is outside the vocabulary (0..{})", id, vocab - 1));
  for (const auto& [id, bias] : r.sampling.logit_bias)
    if (id < 0 || id >= vocab)
      throw RequestError(
          fmt::format("logit_bias names token {}, outside the vocabulary (0..{})", id, vocab - 1));
  if (r.top_logprobs > kMaxTopLogprobs)
    throw RequestError(
        fmt::format("top_logprobs must be in 0..{}, got {}", kMaxTopLogprobs, r.top_logprobs));
  if (r.top_logprobs >= 0 && vocab > (1 << 24))
    throw RequestError(fmt::format(
        "logprobs of a vocabulary of {} tokens are not supported (at most 2^24)", vocab));
  if (!r.stop_strings.empty() && !make_text_stream_)
    throw RequestError(
        "stop strings need a tokenizer, and this server has none (no tokenizer.json in the "
        "model directory); start it with --tokenizer-path DIR, or use stop_token_ids instead");
  const int64_t total = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
  if (total > runner_.max_context_len())
    throw RequestError(
        fmt::format("{} prompt tokens + {} new tokens exceed the context length {}; "
                    "shorten the prompt or lower max_tokens",
                    r.input_ids.size(), r.sampling.max_new_tokens, runner_.max_context_len()));
  const int page = memory_.allocator().page_size();
  const int64_t pages = (total + page - 1) / page;
  if (pages > memory_.allocator().usable_pages())
    throw RequestError(
        fmt::format("{} tokens (prompt + max_tokens) do not fit the KV cache of {} "
                    "tokens even alone; lower max_tokens or start the server with a "
                    "larger --max-total-tokens",
                    total, memory_.allocator().usable_pages() * page));
}

void Scheduler::submit(uint64_t id, ServeRequest request) {
  auto r = std::make_unique<Req>();
  r->id = id;
  r->tokens = request.input_ids;
  r->prompt_len = static_cast<int>(request.input_ids.size());
  if (request.sampling.adjusts_logits()) r->counts = TokenCounts(request.input_ids);
  if (request.grammar) r->matcher = std::make_unique<grammar::GrammarMatcher>(request.grammar);
  r->request = std::move(request);
  if (r->request.sampling.max_new_tokens == 0) {  // nothing to compute
    r->out.finished = true;
    r->out.finish_reason = "length";
    pending_.push_back(std::move(r));
    return;
  }
  waiting_.push_back(std::move(r));
}

void Scheduler::abort(uint64_t id) {
  auto is_id = [id](const std::unique_ptr<Req>& r) { return r->id == id; };
  std::unique_ptr<Req> r;
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), is_id); it != waiting_.end()) {
    r = std::move(*it);
    waiting_.erase(it);
  } else if (auto jt = std::find_if(running_.begin(), running_.end(), is_id);
             jt != running_.end()) {
    r = std::move(*jt);
    running_.erase(jt);
    release(*r);
    ++completions_;  // its memory is free for a retracted request
  } else {
    return;  // already finished
  }
  r->out.finished = true;
  r->out.finish_reason = "abort";
  pending_.push_back(std::move(r));
}

int64_t Scheduler::available_pages() const {
  return memory_.allocator().free_pages() + (cache_ ? cache_->evictable_pages() : 0);
}

// Makes the pages r's next `n` tokens take free, evicting cached prefixes if needed; with a
// window space also its window pages, evicting the tree's window pages if needed (after r
// gave back the window slots its next queries cannot see).
bool Scheduler::reserve_pages(const Req& r, int n) {
  const int64_t pages = memory_.pages_needed(r.cached, r.cached + n);
  const int64_t missing = pages - memory_.allocator().free_pages();
  if (missing > 0 && cache_) cache_->evict(missing);
  if (memory_.allocator().free_pages() < pages) return false;
  if (!memory_.has_window_space()) return true;
  memory_.trim_window(r.row, r.cached);
  const int64_t window_missing = pages - memory_.window_allocator().free_pages();
  if (window_missing > 0 && cache_) cache_->evict_window(window_missing);
  return memory_.window_allocator().free_pages() >= pages;
}

// The window slots of request row `row` for the prefix cache (null without a window space).
static const int32_t* window_row(TokenMemory& memory, int row) {
  return memory.has_window_space() ? memory.window_table().row(row) : nullptr;
}

// Gives the KV a request holds back: computed tokens go to the prefix cache, which keeps
// them while memory allows, and the request's own references and row are dropped.
void Scheduler::release(Req& r) {
  if (r.row < 0) return;
  if (r.failed) {
    // Nothing of it is offered to the prefix cache.
  } else if (caches_states()) {
    cache_final_state(r);
  } else if (cache_) {
    cache_->insert(r.tokens.data(), memory_.req_to_token().row(r.row), r.cached,
                   window_row(memory_, r.row));
  }
  if (cache_ && r.locked) cache_->unlock(r.locked);
  memory_.release(r.row, r.cached);
  if (r.state_slot >= 0) states_->free(r.state_slot);
  if (r.track_slot >= 0) states_->free(r.track_slot);
  r.state_slot = r.track_slot = -1;
  r.track_len = 0;
  r.row = -1;
  r.cached = 0;
  r.locked = nullptr;
}

// Offers a request's prompt to the prefix cache as soon as its prefill is done, so that
// requests arriving while it still decodes can reuse it. The request keeps its own pages and
// locks the cached path instead of the one it matched at admission.
// (Hybrid models share prompts through checkpoint() instead.)
void Scheduler::share_prompt(Req& r) {
  if (!cache_ || states_) return;
  cache_->insert(r.tokens.data(), memory_.req_to_token().row(r.row), r.cached,
                 window_row(memory_, r.row));
  relock(r, r.cached);
}

// Makes the request lock the cached path of its first `len` tokens, the pages it shares with
// the tree, instead of the path it locked before: locked pages are not counted as evictable,
// since evicting them would free nothing while the request holds them.
void Scheduler::relock(Req& r, int len) {
  RadixCache::Match m = cache_->match_prefix(r.tokens.data(), len, /*resumable_window=*/false);
  cache_->lock(m.last);
  if (r.locked) cache_->unlock(r.locked);
  r.locked = m.last;
}

// The tokens of r's prompt that the next prefill pass computes: at most `budget`, and, for a
// hybrid model with the prefix cache, no further than the next position where a snapshot of
// the recurrent state is kept, since the state exists only at the end of a pass.
int Scheduler::prefill_chunk(const Req& r, int budget) const {
  int n = std::min(r.prefill_end - r.cached, budget);
  if (!caches_states()) return n;
  // The prompt end rounded down to a page (itself when aligned): the deepest prefix of the
  // prompt the page-aligned tree can hold.
  const int aligned_end = r.prefill_end / page_size_ * page_size_;
  if (aligned_end > r.cached && aligned_end < r.prefill_end)
    n = std::min(n, aligned_end - r.cached);
  if (extra_buffer_) {
    const int next = (r.cached / track_interval_ + 1) * track_interval_;
    if (next < r.prefill_end) n = std::min(n, next - r.cached);
  }
  return n;
}

// Whether the prefill pass that just ended for r ended where a snapshot is kept.
bool Scheduler::at_checkpoint(const Req& r) const {
  if (r.cached == 0 || r.cached % page_size_ != 0) return false;
  return r.cached == r.prefill_end / page_size_ * page_size_ ||
         (extra_buffer_ && r.cached % track_interval_ == 0);
}

// A free state slot (zeroed unless a copy will fill it), evicting the least recently used
// cached snapshot (never `keep`'s) when none is free; -1 when every slot runs a request.
int Scheduler::take_state_slot(const RadixCache::Node* keep, bool zeroed) {
  if (states_->available() == 0 && cache_) cache_->evict_states(1, keep);
  return states_->available() > 0 ? states_->alloc(zeroed) : -1;
}

// Gives the prefix cache a copy of r's state after its r.cached tokens, with their KV.
// Best effort: with every state slot held by running requests, the cache goes without.
void Scheduler::checkpoint(Req& r) {
  const int slot = take_state_slot(nullptr, false);
  if (slot < 0) return;
  states_->copy(r.state_slot, slot);
  if (!cache_->insert_with_state(r.tokens.data(), memory_.req_to_token().row(r.row), r.cached, slot,
                                 window_row(memory_, r.row)))
    states_->free(slot);  // the tree already has this prefix's state
  relock(r, r.cached);
}

// With pages of more than one token, a request rarely ends on a page boundary; keeps the
// state at the last boundary it decoded past, for cache_final_state. Best effort too.
void Scheduler::track_decode(Req& r) {
  if (r.track_slot < 0) r.track_slot = take_state_slot(nullptr, false);
  if (r.track_slot < 0) return;
  states_->copy(r.state_slot, r.track_slot);
  r.track_len = r.cached;
}

// When a request ends or is retracted: its state after all it computed goes to the cache with
// the KV of exactly those tokens (the slot changes owner, nothing is copied); off a page
// boundary, the state tracked at the last boundary goes instead.
void Scheduler::cache_final_state(Req& r) {
  int len = r.cached;
  int* slot = &r.state_slot;
  if (len % page_size_ != 0) {
    len = r.track_len;
    slot = &r.track_slot;
  }
  if (len > 0 && *slot >= 0 &&
      cache_->insert_with_state(r.tokens.data(), memory_.req_to_token().row(r.row), len, *slot,
                                window_row(memory_, r.row)))
    *slot = -1;  // the tree owns it now
}

void Scheduler::finish(Req& r, const std::string& reason) {
  r.out.finished = true;
  r.out.finish_reason = reason;
  r.finished = true;
  release(r);
  ++completions_;
}

// A RequestError raised while the request ran: it ends with the reason, everything it held is
// freed, and the scheduler carries on with the others (core/error.h's contract).
void Scheduler::fail_request(Req& r, const std::string& message) {
  r.failed = true;
  r.out.error = message;
  finish(r, "error");
}

// Sends a running request back to the head of the queue, its computed KV to the prefix cache.
void Scheduler::retract(std::unique_ptr<Req> r) {
  release(*r);
  r->retracted_at = completions_;
  waiting_.push_front(std::move(r));
  ++totals_.retractions;
}

// Admits the request at the head of the queue if its prompt fits beside the tokens running
// requests are still expected to generate; adds its first chunk to `batch`. Returns the
// chunk's length, 0 when it does not fit.
int Scheduler::try_admit(Req& r, int budget, ForwardBatch& batch, std::vector<Req*>& members) {
  // Re-admitting a retracted request before anything finished would put it back into the
  // shortage that retracted it: it would prefill, be retracted at the next decode step, and so
  // on (ping-pong). It waits, at the head of the queue, for memory that a finish gives back.
  if (r.retracted_at && *r.retracted_at == completions_ && !running_.empty()) return 0;
  const int len = static_cast<int>(r.tokens.size());
  RadixCache::Match match;
  if (cache_) {
    // At least one token is always computed: its logits choose the next token.
    match = cache_->match_prefix(r.tokens.data(), len - 1);
    cache_->lock(match.last);  // before anything below can evict it
  }
  double future = 0;
  for (const auto& q : running_)
    future += std::max(0, q->request.sampling.max_new_tokens - q->generated());
  const int page = memory_.allocator().page_size();
  const auto reserve = static_cast<int64_t>(std::ceil(future * new_token_ratio_ / page));
  // A state slot for the request: a free one, or one a cached snapshot gives up; the matched
  // snapshot itself is copied from, so it stays.
  int state_room = 1;
  if (states_) {
    const int cached_states = cache_ ? cache_->cached_states() : 0;
    if (match.state_slot >= 0 && states_->available() + cached_states == 1) {
      // The matched snapshot holds the only slot there is: compute the prompt from its start.
      cache_->unlock(match.last);
      match = cache_->match_prefix(r.tokens.data(), 0);
      cache_->lock(match.last);
    }
    state_room = states_->available() + cached_states - (match.state_slot >= 0 ? 1 : 0);
  }
  const int64_t need = memory_.pages_needed(match.length, len);
  const bool fits = available_pages() >= need + reserve && state_room > 0;
  const int row = fits ? memory_.req_to_token().alloc() : -1;
  if (row < 0) {
    if (cache_) cache_->unlock(match.last);
    return 0;
  }
  r.row = row;
  if (states_) {
    // Zeroed for a prompt computed from its start; a hit resumes from a copy of the matched
    // snapshot, which is never written.
    r.state_slot = take_state_slot(match.last, match.state_slot < 0);
    STRATA_CHECK(r.state_slot >= 0, "admitted request {} has no state slot", r.id);
    if (match.state_slot >= 0) states_->copy(match.state_slot, r.state_slot);
  }
  if (match.length > 0)
    memory_.share_prefix(row, match.slots.data(), match.length,
                         match.window_slots.empty() ? nullptr : match.window_slots.data());
  r.locked = cache_ ? match.last : nullptr;
  r.cached = match.length;
  r.prefill_end = len;
  r.admitted_at = ++admissions_;
  if (!r.admitted_before) {
    r.admitted_before = true;
    r.cached_tokens = match.length;
    totals_.prompt_tokens += r.prompt_len;
    totals_.cached_prompt_tokens += match.length;
  }
  const int n = prefill_chunk(r, budget);
  STRATA_CHECK(reserve_pages(r, n) &&
                   append_extend(batch, memory_, r.row, r.state_slot, r.tokens, r.cached, n),
               "admitted request {} has no room", r.id);
  r.cached += n;
  members.push_back(&r);
  return n;
}

// Before a decode step: while the running requests' next tokens do not fit, send the newest
// request back to the queue (its KV stays in the prefix cache while memory allows).
void Scheduler::retract_until_decode_fits() {
  for (;;) {
    int64_t need = 0;
    for (const auto& r : running_)
      if (!r->prefilling()) need += memory_.pages_needed(r->cached, r->cached + 1);
    if (available_pages() >= need || running_.size() <= 1) return;
    auto newest = std::max_element(
        running_.begin(), running_.end(),
        [](const auto& a, const auto& b) { return a->admitted_at < b->admitted_at; });
    std::unique_ptr<Req> r = std::move(*newest);
    running_.erase(newest);
    retract(std::move(r));
    new_token_ratio_ = 1.0;  // admit conservatively until memory eases again
  }
}

void Scheduler::add_draw(ForwardBatch& batch, const Req& r) const {
  const ServeRequest& q = r.request;
  const int b = static_cast<int>(batch.sampling.size());
  batch.sampling.push_back(sampling_row(q.sampling, r.generated()));
  if (r.prefilling()) return;  // mid-prompt: its draw is not used
  append_logit_edits(batch.logit_edits, b, runner_.config().vocab_size, q.sampling, r.counts,
                     options_.eos_token_ids);
  if (r.matcher) add_grammar_mask(batch, b, r);
  batch.top_logprobs = std::max(batch.top_logprobs, q.top_logprobs);
  if (q.return_logits) batch.raw_logit_rows.push_back(b);
}

void Scheduler::add_grammar_mask(ForwardBatch& batch, int b, const Req& r) const {
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
  batch.mask_rows.push_back(b);
  for (int64_t w = 0; w < words; ++w)
    batch.token_masks.push_back(static_cast<uint64_t>(bits[2 * w]) |
                                (static_cast<uint64_t>(bits[2 * w + 1]) << 32));
}

void Scheduler::take_draw(Req& r, int b, const ForwardBatch& batch,
                          ModelRunner::SampledTokens& drawn, int& raw_row) {
  const ServeRequest& q = r.request;
  const int token = drawn.ids[b];
  if (q.sampling.adjusts_logits()) r.counts.add_output(token);
  if (q.top_logprobs >= 0) {
    // The pass computed the batch's largest top_logprobs; this request's are the first ones.
    const float* row =
        drawn.logprobs.data() + static_cast<size_t>(b) * logprob_row_width(batch.top_logprobs);
    r.out.logprobs.push_back(token_logprob_from_row(row, token, q.top_logprobs));
  }
  if (q.return_logits) r.out.logits.push_back(std::move(drawn.raw_logits.at(raw_row++)));
  accept(r, token);
}

void Scheduler::accept(Req& r, int token) {
  const ServeRequest& q = r.request;
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

RequestOutput Scheduler::take_output(Req& r) {
  RequestOutput o = std::move(r.out);
  r.out = RequestOutput{};
  o.id = r.id;
  o.prompt_tokens = r.prompt_len;
  o.completion_tokens = r.generated();
  o.cached_tokens = r.cached_tokens;
  return o;
}

std::vector<RequestOutput> Scheduler::step() {
  std::vector<RequestOutput> outputs;
  for (auto& r : pending_) outputs.push_back(take_output(*r));
  pending_.clear();
  if (running_.empty() && waiting_.empty()) return outputs;

  ForwardBatch batch;
  batch.mode = ForwardMode::Extend;
  std::vector<Req*> members;
  int budget = options_.chunked_prefill_size > 0 ? options_.chunked_prefill_size : INT_MAX;
  // Prefill: the next chunks of prompts already admitted, then new requests in arrival order.
  for (auto& r : running_) {
    if (!r->prefilling() || budget <= 0) continue;
    const int n = prefill_chunk(*r, budget);
    if (!reserve_pages(*r, n)) break;
    append_extend(batch, memory_, r->row, r->state_slot, r->tokens, r->cached, n);
    r->cached += n;
    budget -= n;
    members.push_back(r.get());
  }
  const int max_running = memory_.req_to_token().max_requests();
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < max_running) {
    const int n = try_admit(*waiting_.front(), budget, batch, members);
    if (n == 0) break;
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }

  // Decode: one token for every request whose prompt is in; alone, or mixed with the prefill.
  const bool prefill = !members.empty();
  if (!prefill || options_.enable_mixed_chunk) {
    if (!prefill) retract_until_decode_fits();
    for (auto& r : running_) {
      if (r->prefilling() || std::find(members.begin(), members.end(), r.get()) != members.end())
        continue;
      if (!reserve_pages(*r, 1)) {
        STRATA_CHECK(prefill, "decode of request {} does not fit after retraction", r->id);
        continue;  // mixed: this one waits for the next pure decode step
      }
      try {
        append_extend(batch, memory_, r->row, r->state_slot, r->tokens, r->cached, 1);
      } catch (const RequestError& e) {
        fail_request(*r, e.what());  // raised before anything was allocated for it
        continue;
      }
      r->cached += 1;
      members.push_back(r.get());
    }
    if (!prefill) {
      batch.mode = ForwardMode::Decode;
      new_token_ratio_ =
          std::max(options_.min_new_token_ratio, new_token_ratio_ - options_.new_token_ratio_decay);
    }
  }
  if (members.empty() &&
      std::any_of(running_.begin(), running_.end(), [](const auto& r) { return r->finished; })) {
    // Nothing to run, but requests failed while the batch was built: they are the output.
    for (auto& r : running_)
      if (r->finished) outputs.push_back(take_output(*r));
    std::erase_if(running_, [](const auto& r) { return r->finished; });
    return outputs;
  }
  if (members.empty()) {
    // Every admitted prompt is stuck waiting for pages that decoding holds: give the newest
    // one's pages back so that the older ones can finish.
    STRATA_CHECK(running_.size() > 1, "the only running request cannot get KV pages");
    std::unique_ptr<Req> r = std::move(running_.back());
    running_.pop_back();
    retract(std::move(r));
    return outputs;
  }

  // Every request draws on the device that ran the pass, by the rules every device shares
  // (ops/logit_edits.h, ops/sampling.h): the ids come back, with the logprobs and raw logits
  // rows asked for, never the whole [batch, vocab] logits.
  for (const Req* r : members) add_draw(batch, *r);
  ModelRunner::SampledTokens drawn;
  try {
    drawn = runner_.forward_sampled(batch);
  } catch (const RequestError& e) {
    // A limit of the device that the checks before the pass did not know (e.g. the CUDA
    // attention backend's): the pass's requests fail with the reason, the rest carry on.
    for (Req* r : members) fail_request(*r, e.what());
    members.clear();
  }
  ++totals_.forward_passes;
  int raw_row = 0;
  for (size_t b = 0; b < members.size(); ++b) {
    Req& r = *members[b];
    // The window slots no later query sees go back now, not at the request's next pass: a
    // request holds about a window of them between passes (what the window space is sized
    // for).
    if (r.row >= 0) memory_.trim_window(r.row, r.cached);
    const bool prefill_pass = r.cached <= r.prefill_end;  // not a decode step
    if (caches_states() && prefill_pass && at_checkpoint(r)) checkpoint(r);
    if (r.prefilling()) continue;
    if (r.cached == r.prefill_end) share_prompt(r);
    take_draw(r, static_cast<int>(b), batch, drawn, raw_row);
    if (caches_states() && !prefill_pass && !r.finished && page_size_ > 1 &&
        r.cached % page_size_ == 0)
      track_decode(r);
  }

  for (auto& r : running_)
    if (r->finished || !r->out.token_ids.empty()) outputs.push_back(take_output(*r));
  std::erase_if(running_, [](const auto& r) { return r->finished; });
  return outputs;
}

bool Scheduler::flush_cache() {
  if (!running_.empty() || !waiting_.empty()) return false;
  return !cache_ || cache_->flush();
}

int64_t Scheduler::max_request_tokens() const {
  const int64_t pool = memory_.allocator().usable_pages() * memory_.allocator().page_size();
  return std::min<int64_t>(runner_.max_context_len(), pool);
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = totals_;
  s.running = static_cast<int>(running_.size());
  s.waiting = static_cast<int>(waiting_.size());
  s.page_size = memory_.allocator().page_size();
  s.total_pages = memory_.allocator().usable_pages();
  s.used_pages = s.total_pages - memory_.allocator().free_pages();
  s.cached_pages = cache_ ? cache_->cached_pages() : 0;
  if (states_) {
    s.state_slots = states_->num_slots();
    s.used_state_slots = states_->num_slots() - states_->available();
    s.cached_state_slots = cache_ ? cache_->cached_states() : 0;
  }
  s.new_token_ratio = new_token_ratio_;
  return s;
}

}  // namespace strata
