#pragma once
// RadixCache: a prefix tree over token ids whose edges carry the KV slots that hold those
// tokens, so that a new request whose prompt begins like an earlier one reuses that KV
// instead of recomputing it (SGLang's RadixAttention). Keys are split only at page
// boundaries: a node always holds whole pages, so a request that reuses a prefix starts
// writing into a page of its own and never into a shared one.
//
// Ownership: the tree holds one reference on every page it stores (TokenSlotAllocator
// counts them); a request that reuses a prefix takes its own references and locks the path
// (lock_ref) so that the pages are not evicted while it reads them. Unlocked nodes are
// evicted least-recently-used first, leaves before their parents.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cache/req_to_token_pool.h"

namespace strata {

class RadixCache {
 public:
  struct Node;

  struct Match {
    int length = 0;              // tokens matched, a whole number of pages
    std::vector<int32_t> slots;  // their KV slots
    Node* last = nullptr;        // the deepest matched node (lock it while in use)
  };

  explicit RadixCache(TokenSlotAllocator& allocator);
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // The longest cached prefix of tokens[0, n), rounded down to whole pages.
  Match match_prefix(const int* tokens, int n);
  // Keeps the nodes from `node` up to the root from being evicted; unlock undoes one lock.
  void lock(Node* node);
  void unlock(Node* node);
  // Adds tokens[0, n) held at `slots` (n rounded down to whole pages). Pages of the part that
  // is new to the tree gain a reference owned by the tree; the caller keeps its own.
  // Returns the tokens that were already cached.
  int insert(const int* tokens, const int32_t* slots, int n);
  // Frees at least `pages` pages from unlocked nodes, oldest first, if that many exist.
  // Returns the pages actually freed.
  int64_t evict(int64_t pages);
  // Drops every unlocked node (POST /flush_cache). Returns false, changing nothing, when
  // some request still uses the tree.
  bool flush();

  int64_t cached_pages() const { return evictable_pages_ + locked_pages_; }
  int64_t evictable_pages() const { return evictable_pages_; }
  int64_t locked_pages() const { return locked_pages_; }

 private:
  using Key = std::vector<int>;  // the first page of a child's tokens
  Node* split(Node* node, int at);
  void touch(Node* node);

  TokenSlotAllocator& allocator_;
  int page_size_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  int64_t evictable_pages_ = 0, locked_pages_ = 0;
};

struct RadixCache::Node {
  std::vector<int> tokens;     // this edge's tokens (whole pages)
  std::vector<int32_t> slots;  // their KV slots
  Node* parent = nullptr;
  std::map<Key, std::unique_ptr<Node>> children;
  int lock_ref = 0;
  uint64_t last_access = 0;
  int64_t pages(int page_size) const { return static_cast<int64_t>(tokens.size()) / page_size; }
};

}  // namespace strata
