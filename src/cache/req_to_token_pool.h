#pragma once
// ReqToTokenPool: for each running request (a row), the KV slot of each of its positions.
// Attention backends gather a request's keys through its row.
#include <cstdint>
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

// Ties the two together for requests: position p of a request lives at offset p % page_size
// of one of its pages, so a request grows by filling its last page, then taking a new one.
class TokenMemory {
 public:
  TokenMemory(int max_requests, int max_context_len, int64_t num_slots, int page_size);
  ReqToTokenPool& req_to_token() { return req_to_token_; }
  const ReqToTokenPool& req_to_token() const { return req_to_token_; }
  TokenSlotAllocator& allocator() { return allocator_; }
  // Pages needed to grow a request from `old_len` to `new_len` tokens.
  int64_t pages_needed(int old_len, int new_len) const;
  // Grows request `req` from old_len to new_len; writes the new slots to `out` (new_len -
  // old_len entries). Returns false (allocating nothing) when pages run out.
  bool extend(int req, int old_len, int new_len, int32_t* out);
  // Makes positions [0, len) of request `req` the given slots, which another owner (the
  // prefix cache) already holds; the request takes its own reference on each page. `len`
  // must be a whole number of pages so that the request's next token opens a page of its own.
  void share_prefix(int req, const int32_t* slots, int len);
  // Drops the request's reference on each of its pages and frees its row.
  void release(int req, int len);

 private:
  ReqToTokenPool req_to_token_;
  TokenSlotAllocator allocator_;
};

}  // namespace strata
