// The scheduler and the radix prefix cache: what a request gives the cache (its KV when it
// ends or is retracted, its prompt once prefilled) and, for hybrid models, where snapshots of
// the recurrent state are taken and which state slots they hold.
#include "cache/radix_cache.h"
#include "runtime/scheduler.h"
#include "runtime/scheduler_request.h"

namespace strata {

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
}  // namespace strata
