#include "cache/req_to_token_pool.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

ReqToTokenPool::ReqToTokenPool(int max_requests, int max_context_len)
    : max_requests_(max_requests),
      max_context_len_(max_context_len),
      table_(static_cast<size_t>(max_requests) * max_context_len, 0),
      in_use_(max_requests, false) {
  STRATA_CHECK(max_requests > 0 && max_context_len > 0, "{} x {}", max_requests, max_context_len);
  for (int i = max_requests - 1; i >= 0; --i) free_.push_back(i);
}

int ReqToTokenPool::alloc() {
  if (free_.empty()) return -1;
  int r = free_.back();
  free_.pop_back();
  in_use_[r] = true;
  return r;
}

void ReqToTokenPool::free(int req) {
  STRATA_CHECK(req >= 0 && req < max_requests_ && in_use_[req], "freeing request row {} twice",
               req);
  in_use_[req] = false;
  free_.push_back(req);
}

int32_t* ReqToTokenPool::row(int req) {
  STRATA_CHECK(req >= 0 && req < max_requests_, "request row {}", req);
  return table_.data() + static_cast<size_t>(req) * max_context_len_;
}

const int32_t* ReqToTokenPool::row(int req) const {
  return const_cast<ReqToTokenPool*>(this)->row(req);
}

TokenSlotAllocator::TokenSlotAllocator(int64_t num_slots, int page_size) : page_size_(page_size) {
  if (page_size <= 0) fail("--page-size must be at least 1, got {}", page_size);
  num_pages_ = (num_slots + page_size - 1) / page_size + 1;  // + the reserved page 0
  refs_.assign(num_pages_, 0);
  refs_[0] = 1;  // the reserved dummy page is never handed out
  for (int64_t p = num_pages_ - 1; p >= 1; --p) free_.push_back(p);
}

int64_t TokenSlotAllocator::alloc_page() {
  if (free_.empty()) return -1;
  int64_t p = free_.back();
  free_.pop_back();
  refs_[p] = 1;
  return p;
}

void TokenSlotAllocator::retain_page(int64_t page) {
  STRATA_CHECK(page > 0 && page < num_pages_ && refs_[page] > 0, "retaining free page {}", page);
  ++refs_[page];
}

void TokenSlotAllocator::free_page(int64_t page) {
  STRATA_CHECK(page > 0 && page < num_pages_ && refs_[page] > 0, "freeing page {} twice", page);
  if (--refs_[page] == 0) free_.push_back(page);
}

TokenMemory::TokenMemory(int max_requests, int max_context_len, int64_t num_slots, int page_size,
                         WindowSpace window)
    : req_to_token_(max_requests, max_context_len), allocator_(num_slots, page_size) {
  if (window.num_slots > 0) {
    STRATA_CHECK(window.window > 0, "a window space for a window of {}", window.window);
    window_ = std::make_unique<Window>(
        Window{window.window, ReqToTokenPool(max_requests, max_context_len),
               TokenSlotAllocator(window.num_slots, page_size), std::vector<int>(max_requests, 0)});
  }
}

TokenSlotAllocator& TokenMemory::window_allocator() {
  STRATA_CHECK(window_ != nullptr, "the token memory has no window space");
  return window_->allocator;
}

ReqToTokenPool& TokenMemory::window_table() {
  STRATA_CHECK(window_ != nullptr, "the token memory has no window space");
  return window_->table;
}

const ReqToTokenPool& TokenMemory::window_table() const {
  return const_cast<TokenMemory*>(this)->window_table();
}

int TokenMemory::window_start_of(int len) const {
  const int p = allocator_.page_size();
  return std::max(0, len - window() + 1) / p * p;
}

int64_t TokenMemory::pages_needed(int old_len, int new_len) const {
  const int p = allocator_.page_size();
  const int64_t have = (old_len + p - 1) / p, want = (new_len + p - 1) / p;
  return want - have;
}

void TokenMemory::trim_window(int req, int len) {
  if (!window_) return;
  const int p = allocator_.page_size();
  const int last_boundary = len / p * p;
  const int keep_from = window_start_of(std::max(0, last_boundary - p));
  int& first = window_->first_held.at(req);
  int32_t* row = window_->table.row(req);
  for (int pos = first; pos < keep_from; pos += p) {
    if (row[pos] != 0) window_->allocator.free_page(row[pos] / p);
    std::fill(row + pos, row + pos + p, 0);
  }
  first = std::max(first, keep_from);
}

// Slots for positions [old_len, new_len) of `row` from `allocator`, page by page.
static void grow_row(TokenSlotAllocator& allocator, int32_t* row, int old_len, int new_len,
                     int32_t* out) {
  const int p = allocator.page_size();
  for (int pos = old_len; pos < new_len; ++pos) {
    if (pos % p == 0)
      row[pos] = static_cast<int32_t>(allocator.alloc_page() * p);
    else
      row[pos] = row[pos - 1] + 1;
    if (out) out[pos - old_len] = row[pos];
  }
}

bool TokenMemory::extend(int req, int old_len, int new_len, int32_t* out, int32_t* window_out) {
  if (new_len > req_to_token_.max_context_len())
    throw RequestError(fmt::format("request needs {} tokens but the context limit is {}", new_len,
                                   req_to_token_.max_context_len()));
  const int64_t pages = pages_needed(old_len, new_len);
  if (pages > allocator_.free_pages()) return false;
  if (window_) {
    trim_window(req, old_len);  // no query from old_len on sees them
    if (pages > window_->allocator.free_pages()) return false;
    grow_row(window_->allocator, window_->table.row(req), old_len, new_len, window_out);
  }
  grow_row(allocator_, req_to_token_.row(req), old_len, new_len, out);
  return true;
}

void TokenMemory::share_prefix(int req, const int32_t* slots, int len,
                               const int32_t* window_slots) {
  const int p = allocator_.page_size();
  STRATA_CHECK(len % p == 0 && len <= req_to_token_.max_context_len(), "shared prefix of {} tokens",
               len);
  int32_t* row = req_to_token_.row(req);
  std::copy(slots, slots + len, row);
  for (int pos = 0; pos < len; pos += p) allocator_.retain_page(row[pos] / p);
  if (!window_) return;
  const int keep_from = window_start_of(len);
  STRATA_CHECK(keep_from == len || window_slots != nullptr,
               "a shared prefix of {} tokens without its window slots", len);
  int32_t* wrow = window_->table.row(req);
  std::fill(wrow, wrow + keep_from, 0);
  for (int pos = keep_from; pos < len; pos += p) {
    STRATA_CHECK(window_slots[pos] != 0, "a shared prefix without the window slot of position {}",
                 pos);
    std::copy(window_slots + pos, window_slots + pos + p, wrow + pos);
    window_->allocator.retain_page(wrow[pos] / p);
  }
  window_->first_held.at(req) = keep_from;
}

void TokenMemory::release(int req, int len) {
  const int p = allocator_.page_size();
  const int32_t* row = req_to_token_.row(req);
  for (int pos = 0; pos < len; pos += p) allocator_.free_page(row[pos] / p);
  if (window_) {
    int32_t* wrow = window_->table.row(req);
    int& first = window_->first_held.at(req);
    for (int pos = first; pos < len; pos += p)
      if (wrow[pos] != 0) window_->allocator.free_page(wrow[pos] / p);
    std::fill(wrow, wrow + len, 0);
    first = 0;
  }
  req_to_token_.free(req);
}

}  // namespace strata
