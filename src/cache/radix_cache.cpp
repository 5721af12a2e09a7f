#include "cache/radix_cache.h"

#include <algorithm>
#include <queue>

#include "core/error.h"

namespace strata {

RadixCache::RadixCache(TokenSlotAllocator& allocator, StatePool* states,
                       TokenSlotAllocator* window_allocator, int window)
    : allocator_(allocator),
      states_(states),
      window_allocator_(window_allocator),
      window_(window),
      page_size_(allocator.page_size()),
      root_(std::make_unique<Node>()) {
  STRATA_CHECK(!window_allocator || (window > 0 && window_allocator->page_size() == page_size_),
               "a window space of window {} and pages of {} under pages of {}", window,
               window_allocator ? window_allocator->page_size() : 0, page_size_);
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
  if (!node->window_slots.empty()) {
    upper->window_slots.assign(node->window_slots.begin(), node->window_slots.begin() + at);
    node->window_slots.erase(node->window_slots.begin(), node->window_slots.begin() + at);
  }
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

int RadixCache::usable_length(const std::vector<std::pair<Node*, int>>& path,
                              const std::vector<int32_t>& window_slots, bool check_window) const {
  // absent[j]: positions below j without a window slot.
  std::vector<int> absent(window_slots.size() + 1, 0);
  for (size_t j = 0; j < window_slots.size(); ++j)
    absent[j + 1] = absent[j] + (window_slots[j] == 0 ? 1 : 0);
  const auto window_whole = [&](int len) {
    if (!window_allocator_ || !check_window) return true;
    const int keep_from = std::max(0, len - window_ + 1) / page_size_ * page_size_;
    return absent[len] == absent[keep_from];
  };
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const Node* node = it->first;
    const int end = it->second, start = end - static_cast<int>(node->tokens.size());
    if (states_) {  // a hybrid resumes from a node's snapshot
      if (node->state_slot >= 0 && window_whole(end)) return end;
      continue;
    }
    for (int len = end; len > start; len -= page_size_)
      if (window_whole(len)) return len;
  }
  return 0;
}

RadixCache::Match RadixCache::match_prefix(const int* tokens, int n, bool resumable_window) {
  Match m;
  n = n / page_size_ * page_size_;
  Node* node = root_.get();
  int i = 0;
  std::vector<std::pair<Node*, int>> path;  // matched nodes, each with the length after it
  std::vector<int32_t> window_slots;
  while (i < n) {
    auto it = node->children.find(Key(tokens + i, tokens + i + page_size_));
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    const int common = common_pages(*child, tokens + i, n - i, page_size_);
    const bool partial = common < static_cast<int>(child->tokens.size());
    if (partial) child = split(child, common);  // so that exactly the match can be locked
    m.slots.insert(m.slots.end(), child->slots.begin(), child->slots.end());
    window_slots.insert(window_slots.end(), child->window_slots.begin(), child->window_slots.end());
    i += common;
    node = child;
    path.emplace_back(child, i);
    if (partial) break;
  }
  // A hybrid model resumes only where a state snapshot exists, a windowed one only where the
  // window slots are whole: the deepest such length, with the node ending there (split off
  // when the length falls inside one) as the one to lock.
  const int len = usable_length(path, window_slots, resumable_window);
  Node* usable = root_.get();
  for (const auto& [matched, end] : path) {
    const int start = end - static_cast<int>(matched->tokens.size());
    if (end <= len) {
      usable = matched;
      continue;
    }
    if (start < len) usable = split(matched, len - start);
    break;
  }
  m.length = len;
  m.slots.resize(len);
  if (window_allocator_) {
    window_slots.resize(len);
    m.window_slots = std::move(window_slots);
  }
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

void RadixCache::adopt_window(Node* node, const int32_t* window_slots, int from, int to) {
  if (!window_allocator_) return;
  if (node->window_slots.empty()) node->window_slots.assign(node->tokens.size(), 0);
  if (!window_slots) return;
  for (int pos = from; pos < to; pos += page_size_) {
    if (node->window_slots[pos] != 0 || window_slots[pos] == 0) continue;
    std::copy(window_slots + pos, window_slots + pos + page_size_,
              node->window_slots.begin() + pos);
    window_allocator_->retain_page(window_slots[pos] / page_size_);
    ++window_pages_;
  }
}

void RadixCache::free_window(Node* node) {
  for (size_t pos = 0; pos < node->window_slots.size(); pos += page_size_) {
    if (node->window_slots[pos] == 0) continue;
    window_allocator_->free_page(node->window_slots[pos] / page_size_);
    std::fill(node->window_slots.begin() + pos, node->window_slots.begin() + pos + page_size_, 0);
    --window_pages_;
  }
}

// The node that ends exactly after tokens[0, n) (n whole pages), created or split as needed.
RadixCache::Node* RadixCache::insert_path(const int* tokens, const int32_t* slots,
                                          const int32_t* window_slots, int n, int* already_cached) {
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
      adopt_window(leaf.get(), window_slots ? window_slots + i : nullptr, 0, n - i);
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
    // Window slots the tree had given back and the caller still holds come back.
    adopt_window(child, window_slots ? window_slots + i : nullptr, 0, common);
    i += common;
    node = child;
  }
  touch(node);
  *already_cached = i;
  return node;
}

int RadixCache::insert(const int* tokens, const int32_t* slots, int n,
                       const int32_t* window_slots) {
  int already_cached = 0;
  insert_path(tokens, slots, window_slots, n / page_size_ * page_size_, &already_cached);
  return already_cached;
}

bool RadixCache::insert_with_state(const int* tokens, const int32_t* slots, int n, int state_slot,
                                   const int32_t* window_slots) {
  STRATA_CHECK(states_ != nullptr, "a state snapshot offered to a tree without a state pool");
  STRATA_CHECK(n > 0 && n % page_size_ == 0, "a state snapshot after {} tokens (pages of {})", n,
               page_size_);
  STRATA_CHECK(states_->in_use(state_slot), "state snapshot in free slot {}", state_slot);
  int already_cached = 0;
  Node* node = insert_path(tokens, slots, window_slots, n, &already_cached);
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
    free_window(node);
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

int64_t RadixCache::evict_window(int64_t pages) {
  if (!window_allocator_ || pages <= 0) return 0;
  std::vector<Node*> nodes, stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (std::any_of(n->window_slots.begin(), n->window_slots.end(),
                    [](int32_t s) { return s != 0; }))
      nodes.push_back(n);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const Node* a, const Node* b) { return a->last_access < b->last_access; });
  int64_t freed = 0;
  for (Node* n : nodes) {
    if (freed >= pages) break;
    // A page a running request shares stays in use: only the tree's last references count.
    for (size_t pos = 0; pos < n->window_slots.size(); pos += page_size_)
      if (n->window_slots[pos] != 0 &&
          window_allocator_->references(n->window_slots[pos] / page_size_) == 1)
        ++freed;
    free_window(n);
  }
  return freed;
}

bool RadixCache::flush() {
  if (locked_pages_ > 0) return false;
  evict(evictable_pages_);
  STRATA_CHECK(
      root_->children.empty() && evictable_pages_ == 0 && cached_states_ == 0 && window_pages_ == 0,
      "flush left {} pages, {} window pages and {} state snapshots", evictable_pages_,
      window_pages_, cached_states_);
  return true;
}

}  // namespace strata
