// The radix tree with recurrent-state snapshots (hybrid models): matches stop at the deepest
// snapshot, snapshots follow their node through splits, and every way a node goes (state
// eviction, KV eviction, flush) gives its slot back to the state pool.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/radix_cache.h"

namespace strata {

namespace {

StatePool make_pool(int slots) {
  RecurrentStateLayout l;
  l.conv_channels = 4;
  l.conv_width = 3;
  l.num_heads = 2;
  l.head_dim = 2;
  l.state_size = 2;
  return StatePool({{3, l}}, slots);
}

// Tokens 100.. of `n`, and a request's fresh pages for them.
struct Seq {
  std::vector<int> tokens;
  std::vector<int32_t> slots;
};
Seq fresh(TokenSlotAllocator& a, std::vector<int> tokens) {
  Seq s{std::move(tokens), {}};
  const int p = a.page_size();
  for (size_t i = 0; i < s.tokens.size(); i += p) {
    const int64_t page = a.alloc_page();
    for (size_t j = i; j < std::min(s.tokens.size(), i + p); ++j)
      s.slots.push_back(static_cast<int32_t>(page * p + j - i));
  }
  return s;
}
void release(TokenSlotAllocator& a, const Seq& s) {
  for (size_t i = 0; i < s.slots.size(); i += a.page_size())
    a.free_page(s.slots[i] / a.page_size());
}
std::vector<int> iota(int n, int from = 100) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}
// A snapshot slot whose conv state is filled with `value`, as a request would hand over.
int snapshot(StatePool& pool, float value) {
  const int slot = pool.alloc();
  float* conv = pool.conv_state(3, slot);
  std::fill_n(conv, pool.layout(3).conv_numel(), value);
  return slot;
}

}  // namespace

TEST(RadixCacheStates, MatchesStopAtTheDeepestSnapshot) {
  TokenSlotAllocator alloc(64, 4);
  StatePool pool = make_pool(4);
  RadixCache cache(alloc, &pool);
  const Seq a = fresh(alloc, iota(16));
  // KV of 16 tokens, a state after 8 of them only.
  EXPECT_TRUE(cache.insert_with_state(a.tokens.data(), a.slots.data(), 8, snapshot(pool, 8)));
  EXPECT_TRUE(cache.insert_with_state(a.tokens.data(), a.slots.data(), 16, snapshot(pool, 16)));
  release(alloc, a);
  EXPECT_EQ(cache.cached_states(), 2);

  RadixCache::Match m = cache.match_prefix(a.tokens.data(), 15);  // 12 whole pages match
  EXPECT_EQ(m.length, 8);
  EXPECT_EQ(m.slots.size(), 8u);
  ASSERT_GE(m.state_slot, 0);
  EXPECT_EQ(pool.conv_state(3, m.state_slot)[0], 8);
  m = cache.match_prefix(a.tokens.data(), 16);
  EXPECT_EQ(m.length, 16);
  EXPECT_EQ(pool.conv_state(3, m.state_slot)[0], 16);
  // Matching 12 split the node [8, 16) at 12; the snapshot stays with the part that ends at 16.
  EXPECT_EQ(cache.match_prefix(a.tokens.data(), 12).length, 8);
  EXPECT_EQ(pool.conv_state(3, cache.match_prefix(a.tokens.data(), 16).state_slot)[0], 16);
  EXPECT_EQ(cache.match_prefix(a.tokens.data(), 7).length, 0);
  EXPECT_EQ(cache.match_prefix(a.tokens.data(), 7).state_slot, -1);

  // A second snapshot of the same prefix is refused: the caller keeps (and frees) its slot.
  const int again = snapshot(pool, 99);
  EXPECT_FALSE(cache.insert_with_state(a.tokens.data(), a.slots.data(), 16, again));
  EXPECT_TRUE(pool.in_use(again));
  pool.free(again);

  EXPECT_TRUE(cache.flush());
  EXPECT_EQ(cache.cached_states(), 0);
  EXPECT_EQ(pool.available(), 4);
  EXPECT_EQ(alloc.free_pages(), alloc.usable_pages());
}

TEST(RadixCacheStates, EvictingASnapshotKeepsInnerKVAndDropsAUselessLeaf) {
  TokenSlotAllocator alloc(64, 1);
  StatePool pool = make_pool(8);
  RadixCache cache(alloc, &pool);
  const std::vector<int> shared = iota(4);
  std::vector<int> b = shared, c = shared;
  b.insert(b.end(), {7, 7});
  c.insert(c.end(), {9, 9, 9});
  const Seq sb = fresh(alloc, b), sc = fresh(alloc, c);
  EXPECT_TRUE(cache.insert_with_state(sb.tokens.data(), sb.slots.data(), 4, snapshot(pool, 4)));
  EXPECT_TRUE(cache.insert_with_state(sb.tokens.data(), sb.slots.data(), 6, snapshot(pool, 6)));
  EXPECT_TRUE(cache.insert_with_state(sc.tokens.data(), sc.slots.data(), 7, snapshot(pool, 7)));
  release(alloc, sb);
  release(alloc, sc);
  EXPECT_EQ(cache.cached_pages(), 4 + 2 + 3);

  // c is the newest; a lock on it keeps its KV but not the states of b's branch.
  RadixCache::Match mc = cache.match_prefix(c.data(), 7);
  ASSERT_EQ(mc.length, 7);
  cache.lock(mc.last);
  // The least recently used snapshot is b's leaf: the leaf goes with its 2 pages.
  EXPECT_EQ(cache.evict_states(1), 1);
  EXPECT_EQ(cache.cached_states(), 2);
  EXPECT_EQ(cache.cached_pages(), 4 + 3);
  EXPECT_EQ(cache.match_prefix(b.data(), 6).length, 4);  // the shared prefix's state remains
  // Never the state a request is about to copy; an inner node keeps its KV for the node below.
  RadixCache::Match ms = cache.match_prefix(shared.data(), 4);
  EXPECT_EQ(cache.evict_states(5, mc.last), 1);
  EXPECT_FALSE(pool.in_use(ms.state_slot));
  EXPECT_EQ(cache.cached_states(), 1);
  EXPECT_EQ(cache.cached_pages(), 7);
  EXPECT_EQ(cache.match_prefix(c.data(), 7).length, 7);
  EXPECT_EQ(cache.match_prefix(b.data(), 6).length, 0);
  EXPECT_FALSE(cache.flush());  // locked
  cache.unlock(mc.last);
  // KV eviction frees the leaf's snapshot too, and the shared node left without one.
  EXPECT_EQ(cache.evict(1), 7);
  EXPECT_EQ(cache.cached_states(), 0);
  EXPECT_EQ(cache.cached_pages(), 0);
  EXPECT_EQ(pool.available(), 8);
  EXPECT_EQ(alloc.free_pages(), alloc.usable_pages());
}

TEST(RadixCacheStates, TreesWithoutAStatePoolMatchAsBefore) {
  TokenSlotAllocator alloc(64, 2);
  RadixCache cache(alloc);
  const Seq a = fresh(alloc, iota(6));
  cache.insert(a.tokens.data(), a.slots.data(), 6);
  release(alloc, a);
  const RadixCache::Match m = cache.match_prefix(a.tokens.data(), 6);
  EXPECT_EQ(m.length, 6);
  EXPECT_EQ(m.state_slot, -1);
  EXPECT_EQ(cache.evict_states(3), 0);
  EXPECT_TRUE(cache.flush());
}

}  // namespace strata
