#include "cache/radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace strata {

namespace {
// A request's worth of fresh pages for `n` tokens, as TokenMemory would allocate them.
std::vector<int32_t> fresh_slots(TokenSlotAllocator& a, int n) {
  std::vector<int32_t> slots(n);
  const int p = a.page_size();
  for (int i = 0; i < n; i += p) {
    const int64_t page = a.alloc_page();
    for (int j = i; j < std::min(n, i + p); ++j) slots[j] = static_cast<int32_t>(page * p + j - i);
  }
  return slots;
}
void release(TokenSlotAllocator& a, const std::vector<int32_t>& slots) {
  for (size_t i = 0; i < slots.size(); i += a.page_size()) a.free_page(slots[i] / a.page_size());
}
}  // namespace

TEST(RadixCache, MatchesWholePagesOfTheLongestCachedPrefix) {
  TokenSlotAllocator alloc(64, 4);
  RadixCache cache(alloc);
  std::vector<int> a(10);
  std::iota(a.begin(), a.end(), 100);
  const auto slots = fresh_slots(alloc, 10);
  EXPECT_EQ(cache.insert(a.data(), slots.data(), 10), 0);  // 8 tokens = 2 pages kept
  release(alloc, slots);  // the request lets go; the tree keeps its 2 pages
  EXPECT_EQ(cache.cached_pages(), 2);
  EXPECT_EQ(alloc.free_pages(), alloc.usable_pages() - 2);

  std::vector<int> b = a;
  b[6] = 7;  // diverges inside the second page: only the first page matches
  RadixCache::Match m = cache.match_prefix(b.data(), 10);
  EXPECT_EQ(m.length, 4);
  EXPECT_EQ(std::vector<int32_t>(m.slots.begin(), m.slots.end()),
            std::vector<int32_t>(slots.begin(), slots.begin() + 4));
  m = cache.match_prefix(a.data(), 9);
  EXPECT_EQ(m.length, 8);
  EXPECT_EQ(cache.match_prefix(a.data(), 3).length, 0);  // less than a page never matches
}

TEST(RadixCache, LockedPathsSurviveEvictionAndLeastRecentlyUsedGoesFirst) {
  TokenSlotAllocator alloc(64, 1);
  RadixCache cache(alloc);
  const std::vector<int> a{1, 2, 3, 4}, b{1, 2, 9, 9}, c{5, 6};
  for (const auto* t : {&a, &b, &c}) {
    const auto s = fresh_slots(alloc, static_cast<int>(t->size()));
    cache.insert(t->data(), s.data(), static_cast<int>(t->size()));
    release(alloc, s);
  }
  EXPECT_EQ(cache.cached_pages(), 8);  // shared [1, 2] stored once
  RadixCache::Match m = cache.match_prefix(a.data(), 4);
  ASSERT_EQ(m.length, 4);
  cache.lock(m.last);
  EXPECT_EQ(cache.locked_pages(), 4);
  EXPECT_EQ(cache.evictable_pages(), 4);
  EXPECT_EQ(cache.evict(100), 4);  // b's tail and c; never a's path
  EXPECT_EQ(cache.match_prefix(a.data(), 4).length, 4);
  EXPECT_EQ(cache.match_prefix(c.data(), 2).length, 0);
  EXPECT_FALSE(cache.flush());
  cache.unlock(m.last);
  EXPECT_TRUE(cache.flush());
  EXPECT_EQ(alloc.free_pages(), alloc.usable_pages());
}

TEST(RadixCache, PagesSharedWithARequestAreFreedByTheirLastOwner) {
  TokenSlotAllocator alloc(16, 2);
  RadixCache cache(alloc);
  const std::vector<int> a{1, 2, 3, 4};
  const auto s = fresh_slots(alloc, 4);
  cache.insert(a.data(), s.data(), 4);
  EXPECT_EQ(alloc.references(s[0] / 2), 2);  // the request and the tree
  release(alloc, s);
  EXPECT_EQ(alloc.references(s[0] / 2), 1);
  EXPECT_EQ(cache.evict(1), 2);  // one leaf of two pages
  EXPECT_EQ(alloc.free_pages(), alloc.usable_pages());
}

}  // namespace strata
