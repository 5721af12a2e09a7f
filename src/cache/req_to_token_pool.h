#pragma once
// ReqToTokenPool: for each running request (a row), the KV slot of each of its positions.
// Attention backends gather a request's keys through its row.
#include <cstdint>
#include <memory>
#include <vector>

namespace strata {

class ReqToTokenPool {
 public:
  ReqToTokenPool(int max_requests, int max_context_len);
  // A free row, or -1 when every row is taken.
  int alloc();
  void free(int req);
  int32_t* row(int req);
  const int32_t* row(int req) const;
  int max_context_len() const { return max_context_len_; }
  int max_requests() const { return max_requests_; }
  int available() const { return static_cast<int>(free_.size()); }

 private:
  int max_requests_, max_context_len_;
  std::vector<int32_t> table_;
  std::vector<int> free_;
  std::vector<bool> in_use_;
};

// Pages of `page_size` token slots. Page 0 is reserved: slot 0 is the dummy write target
// for padded tokens, so a real token never lands there. A page can have several owners (a
// running request and the radix prefix cache, or several requests sharing a cached prefix):
// each owner holds one reference and the page is free again when the last one lets go.
class TokenSlotAllocator {
 public:
  TokenSlotAllocator(int64_t num_slots, int page_size);
  int page_size() const { return page_size_; }
  int64_t num_slots() const { return num_pages_ * page_size_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t free_slots() const { return free_pages() * page_size_; }
  int64_t usable_pages() const { return num_pages_ - 1; }
  // A free page id with one reference, or -1 when none is left.
  int64_t alloc_page();
  // One more owner of an allocated page.
  void retain_page(int64_t page);
  // Drops one reference; the page returns to the free list with its last owner.
  void free_page(int64_t page);
  int references(int64_t page) const { return refs_.at(page); }

 private:
  int page_size_;
  int64_t num_pages_;
  std::vector<int64_t> free_;
  std::vector<int32_t> refs_;
};

// The slot space of sliding-window layers (SGLang's hybrid SWA memory): a layer that attends to
// the last `window` positions only needs those positions' keys and values, so its rows live
// in a second, smaller slot space. Position p of a request has a slot in both spaces while
// some query still to come can see it (p > seq_len - window); after that its sliding slot is
// given back. Full-attention layers keep every position in the first space.
struct WindowSpace {
  int window = 0;         // the largest sliding window of the layers that use the space
  int64_t num_slots = 0;  // 0: no window space (sliding layers use the full space)
};

// Ties the two together for requests: position p of a request lives at offset p % page_size
// of one of its pages, so a request grows by filling its last page, then taking a new one.
// With a window space, each position also has a slot there (the same page layout, its own
// pages and table, same rows), freed once it leaves every future query's window.
class TokenMemory {
 public:
  TokenMemory(int max_requests, int max_context_len, int64_t num_slots, int page_size,
              WindowSpace window = {});
  ReqToTokenPool& req_to_token() { return req_to_token_; }
  const ReqToTokenPool& req_to_token() const { return req_to_token_; }
  TokenSlotAllocator& allocator() { return allocator_; }
  // Pages needed to grow a request from `old_len` to `new_len` tokens (in each space).
  int64_t pages_needed(int old_len, int new_len) const;
  // Grows request `req` from old_len to new_len; writes the new slots to `out` (new_len -
  // old_len entries) and, with a window space, their window slots to `window_out`. Returns
  // false (allocating nothing) when pages run out in either space. First gives back the
  // window slots no query of this growth can see (trim_window(req, old_len)).
  bool extend(int req, int old_len, int new_len, int32_t* out, int32_t* window_out = nullptr);
  // Makes positions [0, len) of request `req` the given slots, which another owner (the
  // prefix cache) already holds; the request takes its own reference on each page. `len`
  // must be a whole number of pages so that the request's next token opens a page of its own.
  // With a window space, `window_slots` holds the window slots of at least the positions the
  // next query sees (window_start_of(len) onwards; 0 elsewhere).
  void share_prefix(int req, const int32_t* slots, int len, const int32_t* window_slots = nullptr);
  // Drops the request's reference on each of its pages and frees its row.
  void release(int req, int len);

  // The window space (has_window_space() false: none).
  bool has_window_space() const { return window_ != nullptr; }
  int window() const { return window_ ? window_->size : 0; }
  TokenSlotAllocator& window_allocator();
  ReqToTokenPool& window_table();
  const ReqToTokenPool& window_table() const;
  // The first position, rounded down to a page, that a query at position `len` sees.
  int window_start_of(int len) const;
  // Gives back request `req`'s window slots that no query after its first `len` tokens sees,
  // keeping those that prefixes ending at its last two page boundaries need (the prefix cache
  // may resume there: a request repeating a prompt matches up to the page before its last
  // token). Call it only when no pass still in flight reads them.
  void trim_window(int req, int len);

 private:
  struct Window {
    int size;
    ReqToTokenPool table;  // rows shared with req_to_token_; 0 = no slot (given back)
    TokenSlotAllocator allocator;
    std::vector<int> first_held;  // per row: positions below this have no window slot
  };
  ReqToTokenPool req_to_token_;
  TokenSlotAllocator allocator_;
  std::unique_ptr<Window> window_;
};

}  // namespace strata
