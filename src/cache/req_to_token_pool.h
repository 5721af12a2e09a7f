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
// for padded tokens, so a real token never lands there.
class TokenSlotAllocator {
 public:
  TokenSlotAllocator(int64_t num_slots, int page_size);
  int page_size() const { return page_size_; }
  int64_t num_slots() const { return num_pages_ * page_size_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t free_slots() const { return free_pages() * page_size_; }
  // A free page id, or -1 when none is left.
  int64_t alloc_page();
  void free_page(int64_t page);

 private:
  int page_size_;
  int64_t num_pages_;
  std::vector<int64_t> free_;
  std::vector<bool> in_use_;
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
  // Frees the request's pages and its row.
  void release(int req, int len);

 private:
  ReqToTokenPool req_to_token_;
  TokenSlotAllocator allocator_;
};

}  // namespace strata
