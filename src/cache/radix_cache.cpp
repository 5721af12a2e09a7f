#include "cache/radix_cache.h"

#include <algorithm>
#include <queue>

#include "core/error.h"

namespace strata {

RadixCache::RadixCache(TokenSlotAllocator& allocator, StatePool* states)
    : allocator_(allocator),
      states_(states),
      page_size_(allocator.page_size()),
      root_(std::make_unique<Node>()) {
  root_->lock_ref = 1;  // the root holds no tokens and is never evicted
}

RadixCache::~RadixCache() = default;

void RadixCache::touch(Node* node) {
  const uint64_t now = ++clock_;
  for (; node != nullptr; node = node->parent) node->last_access = now;
}

// Splits `node` so that its first `at` tokens (whole pages) become a new parent node.
RadixCache::Node* RadixCache::split(Node* node, int at) {
  STRATA_CHECK(at > 0 && at < static_cast<int>(node->tokens.size()) && at % page_size_ == 0,
               "split at {} of {}", at, node->tokens.size());
  Node* parent = node->parent;
  const Key key(node->tokens.begin(), node->tokens.begin() + page_size_);
  auto upper = std::make_unique<Node>();
  upper->tokens.assign(node->tokens.begin(), node->tokens.begin() + at);
  upper->slots.assign(node->slots.begin(), node->slots.begin() + at);
  upper->parent = parent;
  upper->lock_ref = node->lock_ref;  // every lock through `node` passes through its prefix too
  upper->last_access = node->last_access;
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + at);
  node->slots.erase(node->slots.begin(), node->slots.begin() + at);
  node->parent = upper.get();
  std::unique_ptr<Node> lower = std::move(parent->children.at(key));
  upper->children[Key(node->tokens.begin(), node->tokens.begin() + page_size_)] = std::move(lower);
  Node* result = upper.get();
  parent->children[key] = std::move(upper);
  return result;
}

// Tokens (whole pages) that `node`'s edge shares with tokens[0, n).
static int common_pages(const RadixCache::Node& node, const int* tokens, int n, int page_size) {
  const int limit = std::min<int>(static_cast<int>(node.tokens.size()), n);
  int same = 0;
  while (same < limit && node.tokens[same] == tokens[same]) ++same;
  return same / page_size * page_size;
}

RadixCache::Match RadixCache::match_prefix(const int* tokens, int n) {
  Match m;
  n = n / page_size_ * page_size_;
  Node* node = root_.get();
  int i = 0;
  // A hybrid model can resume only where a state snapshot exists: the deepest such node.
  Node* usable = root_.get();
  int usable_len = 0;
  while (i < n) {
    auto it = node->children.find(Key(tokens + i, tokens + i + page_size_));
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    const int common = common_pages(*child, tokens + i, n - i, page_size_);
    const bool partial = common < static_cast<int>(child->tokens.size());
    if (partial) child = split(child, common);  // so that exactly the match can be locked
    m.slots.insert(m.slots.end(), child->slots.begin(), child->slots.end());
    i += common;
    node = child;
    if (!states_ || child->state_slot >= 0) {
      usable = child;
      usable_len = i;
    }
    if (partial) break;
  }
  m.length = usable_len;
  m.slots.resize(usable_len);
  m.last = usable;
  if (usable != root_.get()) m.state_slot = usable->state_slot;
  touch(usable);
  return m;
}

void RadixCache::lock(Node* node) {
  for (; node != root_.get(); node = node->parent) {
    if (node->lock_ref++ == 0) {
      evictable_pages_ -= node->pages(page_size_);
      locked_pages_ += node->pages(page_size_);
    }
  }
}

void RadixCache::unlock(Node* node) {
  for (; node != root_.get(); node = node->parent) {
    STRATA_CHECK(node->lock_ref > 0, "unlocking an unlocked radix node");
    if (--node->lock_ref == 0) {
      evictable_pages_ += node->pages(page_size_);
      locked_pages_ -= node->pages(page_size_);
    }
  }
}

// The node that ends exactly after tokens[0, n) (n whole pages), created or split as needed.
RadixCache::Node* RadixCache::insert_path(const int* tokens, const int32_t* slots, int n,
                                          int* already_cached) {
  Node* node = root_.get();
  int i = 0;
  while (i < n) {
    const Key key(tokens + i, tokens + i + page_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->tokens.assign(tokens + i, tokens + n);
      leaf->slots.assign(slots + i, slots + n);
      leaf->parent = node;
      for (int pos = 0; pos < n - i; pos += page_size_)
        allocator_.retain_page(leaf->slots[pos] / page_size_);
      evictable_pages_ += leaf->pages(page_size_);
      Node* added = leaf.get();
      node->children[key] = std::move(leaf);
      touch(added);
      *already_cached = i;
      return added;
    }
    Node* child = it->second.get();
    const int common = common_pages(*child, tokens + i, n - i, page_size_);
    if (common < static_cast<int>(child->tokens.size())) child = split(child, common);
    i += common;
    node = child;
  }
  touch(node);
  *already_cached = i;
  return node;
}

int RadixCache::insert(const int* tokens, const int32_t* slots, int n) {
  int already_cached = 0;
  insert_path(tokens, slots, n / page_size_ * page_size_, &already_cached);
  return already_cached;
}

bool RadixCache::insert_with_state(const int* tokens, const int32_t* slots, int n, int state_slot) {
  STRATA_CHECK(states_ != nullptr, "a state snapshot offered to a tree without a state pool");
  STRATA_CHECK(n > 0 && n % page_size_ == 0, "a state snapshot after {} tokens (pages of {})", n,
               page_size_);
  STRATA_CHECK(states_->in_use(state_slot), "state snapshot in free slot {}", state_slot);
  int already_cached = 0;
  Node* node = insert_path(tokens, slots, n, &already_cached);
  if (node->state_slot >= 0) return false;
  node->state_slot = state_slot;
  ++cached_states_;
  return true;
}

void RadixCache::free_state(Node* node) {
  if (node->state_slot < 0) return;
  states_->free(node->state_slot);
  node->state_slot = -1;
  --cached_states_;
}

int64_t RadixCache::remove_leaf(Node* leaf, Node** survivor) {
  STRATA_CHECK(leaf->children.empty() && leaf->lock_ref == 0, "evicting a used radix node");
  int64_t freed = 0;
  Node* node = leaf;
  for (;;) {
    for (size_t pos = 0; pos < node->slots.size(); pos += page_size_)
      allocator_.free_page(node->slots[pos] / page_size_);
    freed += node->pages(page_size_);
    evictable_pages_ -= node->pages(page_size_);
    free_state(node);
    Node* parent = node->parent;
    parent->children.erase(Key(node->tokens.begin(), node->tokens.begin() + page_size_));
    node = parent;
    // Without a snapshot, nothing below a hybrid tree's leaf can be resumed: it goes too.
    if (!states_ || node == root_.get() || !node->children.empty() || node->lock_ref > 0 ||
        node->state_slot >= 0)
      break;
  }
  *survivor = node;
  return freed;
}

int64_t RadixCache::evict(int64_t pages) {
  auto older = [](const Node* a, const Node* b) { return a->last_access > b->last_access; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> leaves(older);
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->children.empty() && n->lock_ref == 0) leaves.push(n);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
  int64_t freed = 0;
  while (freed < pages && !leaves.empty()) {
    Node* leaf = leaves.top();
    leaves.pop();
    Node* parent = nullptr;
    freed += remove_leaf(leaf, &parent);
    if (parent->children.empty() && parent->lock_ref == 0) leaves.push(parent);
  }
  return freed;
}

int RadixCache::evict_states(int count, const Node* keep) {
  if (!states_) return 0;
  std::vector<Node*> nodes, stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->state_slot >= 0 && n != keep) nodes.push_back(n);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const Node* a, const Node* b) { return a->last_access < b->last_access; });
  // Nodes later in the list keep their snapshots, so removing a leaf (which takes only
  // ancestors without one) never deletes a node the loop has yet to visit.
  int freed = 0;
  for (Node* n : nodes) {
    if (freed >= count) break;
    if (n->children.empty() && n->lock_ref == 0) {
      Node* survivor = nullptr;
      remove_leaf(n, &survivor);
    } else {
      free_state(n);  // an inner node keeps its KV for the snapshots below it
    }
    ++freed;
  }
  return freed;
}

bool RadixCache::flush() {
  if (locked_pages_ > 0) return false;
  evict(evictable_pages_);
  STRATA_CHECK(root_->children.empty() && evictable_pages_ == 0 && cached_states_ == 0,
               "flush left {} pages and {} state snapshots", evictable_pages_, cached_states_);
  return true;
}

}  // namespace strata
