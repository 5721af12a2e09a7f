#include "cache/radix_cache.h"

#include <algorithm>
#include <queue>

#include "core/error.h"

namespace strata {

RadixCache::RadixCache(TokenSlotAllocator& allocator)
    : allocator_(allocator), page_size_(allocator.page_size()), root_(std::make_unique<Node>()) {
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
  m.last = root_.get();
  n = n / page_size_ * page_size_;
  Node* node = root_.get();
  int i = 0;
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
    if (partial) break;
  }
  m.length = i;
  m.last = node;
  touch(node);
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

int RadixCache::insert(const int* tokens, const int32_t* slots, int n) {
  n = n / page_size_ * page_size_;
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
      return i;
    }
    Node* child = it->second.get();
    const int common = common_pages(*child, tokens + i, n - i, page_size_);
    if (common < static_cast<int>(child->tokens.size())) child = split(child, common);
    i += common;
    node = child;
  }
  touch(node);
  return i;
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
    for (size_t pos = 0; pos < leaf->slots.size(); pos += page_size_)
      allocator_.free_page(leaf->slots[pos] / page_size_);
    freed += leaf->pages(page_size_);
    evictable_pages_ -= leaf->pages(page_size_);
    Node* parent = leaf->parent;
    parent->children.erase(Key(leaf->tokens.begin(), leaf->tokens.begin() + page_size_));
    if (parent->children.empty() && parent->lock_ref == 0) leaves.push(parent);
  }
  return freed;
}

bool RadixCache::flush() {
  if (locked_pages_ > 0) return false;
  evict(evictable_pages_);
  STRATA_CHECK(root_->children.empty() && evictable_pages_ == 0, "flush left {} pages",
               evictable_pages_);
  return true;
}

}  // namespace strata
