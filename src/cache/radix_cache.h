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
//
// Hybrid models (attention + recurrent layers): a KV prefix alone cannot resume a request,
// because the recurrent layers' state after the prefix is needed too. Built with a StatePool,
// the tree also keeps state snapshots: a node may own one StatePool slot holding every
// recurrent layer's state after the node's last token (SGLang's MambaRadixCache). A match is
// then usable only up to the deepest matched node that holds a snapshot, so that the KV and
// the state describe the same tokens; the request starts from a copy of that snapshot.
// Snapshots are evicted least-recently-used first, independently of the KV (an inner node
// may lose its snapshot and keep its KV for deeper nodes); a leaf that loses its snapshot is
// useless and goes with it, KV included.
//
// Models with sliding-window layers in a window space (TokenMemory's WindowSpace): a prefix
// resumes only if the window slots of the positions its next query sees are still held. Each
// node keeps the window slots it still has (0 where given back, SGLang's tombstones); a match
// is cut back to the deepest page boundary whose window is whole. Window pages are evicted
// least-recently-used first, on their own (evict_window), keeping the nodes' full KV.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cache/req_to_token_pool.h"
#include "cache/state_pool.h"

namespace strata {

class RadixCache {
 public:
  struct Node;

  struct Match {
    int length = 0;              // tokens matched, a whole number of pages
    std::vector<int32_t> slots;  // their KV slots
    Node* last = nullptr;        // the deepest matched node (lock it while in use)
    int state_slot = -1;         // hybrid: the snapshot of the state after `length` tokens
    // Window space: the window slots of the `length` tokens (0 where not held; always held
    // from TokenMemory::window_keep_from(length) on).
    std::vector<int32_t> window_slots;
  };

  // `states`: the recurrent-state pool of a hybrid model (null for attention-only models);
  // the tree then keeps state snapshots and matches only up to them.
  // `window_allocator` and `window`: the window space of the token memory (null: none).
  explicit RadixCache(TokenSlotAllocator& allocator, StatePool* states = nullptr,
                      TokenSlotAllocator* window_allocator = nullptr, int window = 0);
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // The longest cached prefix of tokens[0, n), rounded down to whole pages; for a hybrid
  // model, cut back to the deepest matched node that holds a state snapshot.
  // With a window space the match is cut back to where its window is whole, unless
  // `resumable_window` is false (to lock the path of a request that holds its own window).
  Match match_prefix(const int* tokens, int n, bool resumable_window = true);
  // Keeps the nodes from `node` up to the root from being evicted; unlock undoes one lock.
  void lock(Node* node);
  void unlock(Node* node);
  // Adds tokens[0, n) held at `slots` (n rounded down to whole pages). Pages of the part that
  // is new to the tree gain a reference owned by the tree; the caller keeps its own.
  // Returns the tokens that were already cached. With a window space, `window_slots` are the
  // tokens' window slots (0 where the caller holds none); the tree takes a reference on
  // those it did not hold yet.
  int insert(const int* tokens, const int32_t* slots, int n, const int32_t* window_slots = nullptr);
  // Hybrid models: as insert(), with `state_slot` (a StatePool slot the caller holds) the
  // state after tokens[0, n), n a whole number of pages. Returns true when the tree took the
  // slot; false when it already holds a snapshot there (the caller keeps and frees its slot).
  bool insert_with_state(const int* tokens, const int32_t* slots, int n, int state_slot,
                         const int32_t* window_slots = nullptr);
  // Frees at least `pages` pages from unlocked nodes, oldest first, if that many exist.
  // Returns the pages actually freed.
  int64_t evict(int64_t pages);
  // Frees at least `count` state snapshots, least recently used first, never `keep`'s (the
  // one a request is about to copy). Returns the snapshots actually freed.
  int evict_states(int count, const Node* keep = nullptr);
  // Window space: gives back the tree's references on window pages, least recently used
  // nodes first, until at least `pages` pages are free again or none is left to give.
  // Returns the pages that became free.
  int64_t evict_window(int64_t pages);
  // Window pages the tree holds a reference on.
  int64_t window_pages() const { return window_pages_; }
  // Drops every unlocked node (POST /flush_cache). Returns false, changing nothing, when
  // some request still uses the tree.
  bool flush();

  int64_t cached_pages() const { return evictable_pages_ + locked_pages_; }
  int64_t evictable_pages() const { return evictable_pages_; }
  int64_t locked_pages() const { return locked_pages_; }
  // State snapshots the tree holds (all of them can be evicted).
  int cached_states() const { return cached_states_; }

 private:
  using Key = std::vector<int>;  // the first page of a child's tokens
  Node* split(Node* node, int at);
  void touch(Node* node);
  Node* insert_path(const int* tokens, const int32_t* slots, const int32_t* window_slots, int n,
                    int* already_cached);
  // Takes a reference on the window pages of `window_slots` (node positions [from, to)) that
  // `node` does not hold yet.
  void adopt_window(Node* node, const int32_t* window_slots, int from, int to);
  void free_window(Node* node);
  // The deepest prefix length of the matched path (nodes with their end positions) that can
  // resume: a snapshot node's end for hybrids, with the window whole at that length.
  int usable_length(const std::vector<std::pair<Node*, int>>& path,
                    const std::vector<int32_t>& window_slots, bool check_window) const;
  // Removes an unlocked leaf with its pages and snapshot; for a hybrid tree, then also the
  // ancestors that are left as unlocked leaves without a snapshot. Returns the pages freed
  // and the deepest surviving ancestor.
  int64_t remove_leaf(Node* leaf, Node** survivor);
  void free_state(Node* node);

  TokenSlotAllocator& allocator_;
  StatePool* states_;
  TokenSlotAllocator* window_allocator_;
  int window_;
  int64_t window_pages_ = 0;
  int page_size_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  int64_t evictable_pages_ = 0, locked_pages_ = 0;
  int cached_states_ = 0;
};

struct RadixCache::Node {
  std::vector<int> tokens;            // this edge's tokens (whole pages)
  std::vector<int32_t> slots;         // their KV slots
  std::vector<int32_t> window_slots;  // window space: their window slots, 0 where not held
  Node* parent = nullptr;
  std::map<Key, std::unique_ptr<Node>> children;
  int lock_ref = 0;
  int state_slot = -1;  // hybrid: StatePool slot with the state after this node's last token
  uint64_t last_access = 0;
  int64_t pages(int page_size) const { return static_cast<int64_t>(tokens.size()) / page_size; }
};

}  // namespace strata
