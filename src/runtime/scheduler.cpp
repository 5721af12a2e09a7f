#include "runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "grammar/compiled_grammar.h"
#include "model/json_util.h"
#include "ops/logprobs.h"
#include "runtime/batch_builder.h"
#include "runtime/pipeline_pass.h"
#include "runtime/scheduler_request.h"

namespace strata {

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
  if (options.overlap_grammar_masks) mask_worker_ = std::make_unique<MaskWorker>();
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
  const auto len = static_cast<int64_t>(r.input_ids.size());
  if (r.prompt_logprobs_from < -1 || r.prompt_logprobs_from >= len)
    throw RequestError(fmt::format(
        "prompt logprobs from position {} (logprob_start_len), but the prompt has {} tokens: "
        "give -1 (none) or a position in 0..{}",
        r.prompt_logprobs_from, len, len - 1));
  if (r.prompt_top_logprobs < 0 || r.prompt_top_logprobs > kMaxTopLogprobs)
    throw RequestError(fmt::format("top logprobs of prompt tokens must be in 0..{}, got {}",
                                   kMaxTopLogprobs, r.prompt_top_logprobs));
  if (!r.stop_strings.empty() && !make_text_stream_)
    throw RequestError(
        "stop strings need a tokenizer, and this server has none (no tokenizer.json in the "
        "model directory); start it with --tokenizer-path DIR, or use stop_token_ids instead");
  // The last stage draws: a grammar's masks would have to be computed there, from matcher
  // state kept where the tokens are accepted.
  if (pipeline_ && r.grammar)
    throw RequestError(fmt::format(
        "structured output (a grammar, JSON schema or regex) is not supported by a server "
        "started with --pp-size {}; leave it out of the request, or serve without --pp-size",
        pipeline_->size()));
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
  r->prompt_logprob_next =
      request.prompt_logprobs_from < 0 ? r->prompt_len : std::max(request.prompt_logprobs_from, 1);
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
    // At least one token is always computed: its logits choose the next token. Prompt
    // logprobs need the logits of every position from the one predicting the first token
    // still owed (SGLang's logprob_start_len): no hit over those.
    const int reusable = r.wants_prompt_logits() ? r.prompt_logprob_next - 1 : len - 1;
    match = cache_->match_prefix(r.tokens.data(), reusable);
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
  if (running_.empty() && waiting_.empty() && in_flight_.empty()) return outputs;

  ForwardBatch batch;
  const std::vector<Req*> members = build_batch(batch);
  if (!members.empty()) {
    launch(std::move(batch), members);
    if (static_cast<int>(in_flight_.size()) >= std::max(1, options_.micro_batches))
      take_oldest_pass();
  } else if (!in_flight_.empty()) {
    take_oldest_pass();  // everything that could run is in flight
  } else if (std::none_of(running_.begin(), running_.end(),
                          [](const auto& r) { return r->finished; })) {
    // Every admitted prompt is stuck waiting for pages that decoding holds: give the newest
    // one's pages back so that the older ones can finish. (Requests that failed while the
    // batch was built are this step's outputs instead.)
    STRATA_CHECK(running_.size() > 1, "the only running request cannot get KV pages");
    std::unique_ptr<Req> r = std::move(running_.back());
    running_.pop_back();
    retract(std::move(r));
    return outputs;
  }
  for (auto& r : running_)
    if (r->finished || !r->out.token_ids.empty()) outputs.push_back(take_output(*r));
  std::erase_if(running_, [](const auto& r) { return r->finished; });
  return outputs;
}

std::vector<Scheduler::Req*> Scheduler::build_batch(ForwardBatch& batch) {
  batch.mode = ForwardMode::Extend;
  std::vector<Req*> members;
  int budget = options_.chunked_prefill_size > 0 ? options_.chunked_prefill_size : INT_MAX;
  // With M micro-batches a pass takes at most 1/M of the live requests, so that the others
  // fill the passes behind it.
  const size_t live = running_.size() + waiting_.size();
  const int parts = std::max(1, options_.micro_batches);
  const size_t most = parts > 1 ? std::max<size_t>(1, (live + parts - 1) / parts) : SIZE_MAX;
  // A pass that returns prompt logits computes the logits of all its rows ([tokens, vocab]
  // f32): at most max_prompt_logits_bytes of them (by default, with a 128k vocabulary, 512
  // tokens), so that one request asking for prompt logprobs cannot take gigabytes.
  const int logits_tokens = static_cast<int>(std::clamp<int64_t>(
      options_.max_prompt_logits_bytes / (4 * int64_t{runner_.config().vocab_size}), 1, INT_MAX));
  const auto cap_for = [&](const Req& r) {
    if (r.wants_prompt_logits())
      budget = std::min(budget, logits_tokens - static_cast<int>(batch.input_ids.size()));
  };
  // Prefill: the next chunks of prompts already admitted, then new requests in arrival order.
  for (auto& r : running_) {
    if (!r->prefilling() || r->in_flight || members.size() >= most) continue;
    cap_for(*r);
    if (budget <= 0) continue;
    const int n = prefill_chunk(*r, budget);
    if (!reserve_pages(*r, n)) break;
    append_extend(batch, memory_, r->row, r->state_slot, r->tokens, r->cached, n);
    r->cached += n;
    budget -= n;
    members.push_back(r.get());
  }
  const int max_running = memory_.req_to_token().max_requests();
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < max_running &&
         members.size() < most) {
    cap_for(*waiting_.front());
    if (budget <= 0) break;
    const int n = try_admit(*waiting_.front(), budget, batch, members);
    if (n == 0) break;
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }

  // Decode: one token for every request whose prompt is in; alone, or mixed with the prefill.
  // A request whose page does not fit while passes are in flight waits for their draws (which
  // may finish requests); retraction happens only with nothing in flight.
  const bool prefill = !members.empty();
  if (!prefill || options_.enable_mixed_chunk) {
    if (!prefill && in_flight_.empty()) retract_until_decode_fits();
    for (auto& r : running_) {
      if (members.size() >= most) break;
      if (r->prefilling() || r->in_flight ||
          std::find(members.begin(), members.end(), r.get()) != members.end())
        continue;
      if (!reserve_pages(*r, 1)) {
        STRATA_CHECK(prefill || !in_flight_.empty(),
                     "decode of request {} does not fit after retraction", r->id);
        continue;  // this one waits for a later decode step
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
  return members;
}

// Every request draws on the device that ran the pass, by the rules every device shares
// (ops/logit_edits.h, ops/sampling.h): the ids come back, with the logprobs and raw logits
// rows asked for, never the whole [batch, vocab] logits. Grammar masks are computed while
// the forward runs (run_sampled), unless overlap_grammar_masks is off.
void Scheduler::launch(ForwardBatch batch, const std::vector<Req*>& members) {
  ModelRunner::LateMasks late;
  late_reqs_.clear();
  for (const Req* r : members) add_draw(batch, *r, late);
  InFlight pass;
  pass.prompt_rows = ask_prompt_logits(batch, members);
  try {
    pass.drawn = run_sampled(batch, late, &pass.drawn_here);
  } catch (const RequestError& e) {
    // A limit of the device that the checks before the pass did not know (e.g. the CUDA
    // attention backend's): the pass's requests fail with the reason, the rest carry on.
    for (Req* r : members) fail_request(*r, e.what());
    ++totals_.forward_passes;
    return;
  }
  ++totals_.forward_passes;
  for (Req* r : members) {
    r->in_flight = true;
    pass.members.push_back(r->id);
  }
  pass.batch = std::move(batch);
  in_flight_.push_back(std::move(pass));
}

void Scheduler::take_oldest_pass() {
  InFlight pass = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (!pass.drawn_here) {
    const auto start = std::chrono::steady_clock::now();
    pass.drawn = collect_pipelined_draws(runner_, *pipeline_, pass.batch, answer_rank_);
    totals_.pipeline_wait_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<Req*> members;
  for (uint64_t id : pass.members) {
    const auto it =
        std::find_if(running_.begin(), running_.end(), [id](const auto& r) { return r->id == id; });
    members.push_back(it == running_.end() ? nullptr : it->get());  // null: aborted meanwhile
    if (members.back()) members.back()->in_flight = false;
  }
  take_prompt_logprobs(pass.prompt_rows, members, pass.drawn);
  for (size_t b = 0; b < members.size(); ++b) {
    if (!members[b]) continue;
    Req& r = *members[b];
    // The window slots no later query sees go back now, not at the request's next pass: a
    // request holds about a window of them between passes (what the window space is sized
    // for).
    if (r.row >= 0) memory_.trim_window(r.row, r.cached);
    const bool prefill_pass = r.cached <= r.prefill_end;  // not a decode step
    if (caches_states() && prefill_pass && at_checkpoint(r)) checkpoint(r);
    if (r.prefilling()) continue;
    if (r.cached == r.prefill_end) share_prompt(r);
    take_draw(r, static_cast<int>(b), pass.batch, pass.drawn);
    if (caches_states() && !prefill_pass && !r.finished && page_size_ > 1 &&
        r.cached % page_size_ == 0)
      track_decode(r);
  }
}

bool Scheduler::flush_cache() {
  if (!running_.empty() || !waiting_.empty() || !in_flight_.empty()) return false;
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
  s.micro_batches = std::max(1, options_.micro_batches);
  s.passes_in_flight = static_cast<int>(in_flight_.size());
  return s;
}

}  // namespace strata
