// The window space of sliding-window layers (TokenMemory's WindowSpace, RadixCache's window
// slots): a request holds window slots only for the positions a later query can see, every
// page comes back when it ends, and the prefix cache resumes only where the window is whole.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/radix_cache.h"
#include "cache/req_to_token_pool.h"

namespace strata {

namespace {

// Positions of request row `req` that hold a window slot.
std::vector<int> held_positions(TokenMemory& m, int req, int len) {
  std::vector<int> held;
  for (int pos = 0; pos < len; ++pos)
    if (m.window_table().row(req)[pos] != 0) held.push_back(pos);
  return held;
}

std::vector<int> range(int begin, int end) {
  std::vector<int> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

}  // namespace

TEST(WindowSpace, ARequestHoldsOnlyTheWindowsOfItsLastPageBoundaries) {
  // Window 6, pages of 4: after 21 tokens the last boundaries are 20 and 16; a query at 16
  // sees 11..16, so pages from 8 on are held.
  TokenMemory m(2, 64, 64, 4, WindowSpace{6, 32});
  const int req = m.req_to_token().alloc();
  std::vector<int32_t> slots(21), window(21);
  ASSERT_TRUE(m.extend(req, 0, 21, slots.data(), window.data()));
  EXPECT_EQ(held_positions(m, req, 21).size(), 21u);  // the pass reads them all
  for (int i = 0; i < 21; ++i) EXPECT_EQ(window[i], m.window_table().row(req)[i]);
  m.trim_window(req, 21);
  EXPECT_EQ(held_positions(m, req, 21), range(8, 21));
  EXPECT_EQ(m.window_allocator().free_pages(), m.window_allocator().usable_pages() - 4);
  // Decoding on: each extend gives back what its queries cannot see.
  for (int len = 21; len < 40; ++len) {
    int32_t s, w;
    ASSERT_TRUE(m.extend(req, len, len + 1, &s, &w));
    EXPECT_NE(w, 0);
    EXPECT_LE(held_positions(m, req, len + 1).size(), 6u + 3 * 4) << len;
  }
  // Full slots are never given back while the request runs.
  EXPECT_EQ(m.allocator().free_pages(), m.allocator().usable_pages() - 10);
  m.release(req, 40);
  EXPECT_EQ(m.allocator().free_pages(), m.allocator().usable_pages());
  EXPECT_EQ(m.window_allocator().free_pages(), m.window_allocator().usable_pages());
}

TEST(WindowSpace, ExtendFailsWithoutTakingAnythingWhenWindowPagesRunOut) {
  TokenMemory m(2, 64, 64, 4, WindowSpace{4, 12});  // 3 usable window pages
  const int a = m.req_to_token().alloc();
  std::vector<int32_t> s(16), w(16);
  const int64_t full_free = m.allocator().free_pages();
  EXPECT_FALSE(m.extend(a, 0, 16, s.data(), w.data()));  // 4 pages at once do not fit
  EXPECT_EQ(m.allocator().free_pages(), full_free);
  EXPECT_EQ(m.window_allocator().free_pages(), 3);
  ASSERT_TRUE(m.extend(a, 0, 8, s.data(), w.data()));
  m.trim_window(a, 8);  // boundaries 8 and 4: a query at 4 sees 1..4, so everything stays
  ASSERT_TRUE(m.extend(a, 8, 12, s.data(), w.data()));
  EXPECT_EQ(m.window_allocator().free_pages(), 0);
  m.trim_window(a, 12);  // boundaries 12 and 8: 5..8 and on; page 0..4 goes
  ASSERT_TRUE(m.extend(a, 12, 16, s.data(), w.data()));
  m.release(a, 16);
  EXPECT_EQ(m.window_allocator().free_pages(), 3);
}

TEST(WindowSpace, APrefixResumesOnlyWhereItsWindowIsWholeAndEvictionKeepsFullKV) {
  constexpr int kPage = 2, kWindow = 4;
  TokenMemory m(4, 64, 64, kPage, WindowSpace{kWindow, 32});
  RadixCache cache(m.allocator(), nullptr, &m.window_allocator(), kWindow);
  std::vector<int> tokens(16);
  std::iota(tokens.begin(), tokens.end(), 10);
  const int a = m.req_to_token().alloc();
  std::vector<int32_t> s(16), w(16);
  ASSERT_TRUE(m.extend(a, 0, 10, s.data(), w.data()));
  m.trim_window(a, 10);
  // The prompt goes to the tree while its window is still held (what share_prompt does).
  cache.insert(tokens.data(), m.req_to_token().row(a), 10, m.window_table().row(a));
  ASSERT_TRUE(m.extend(a, 10, 16, s.data(), w.data()));
  m.trim_window(a, 16);
  cache.insert(tokens.data(), m.req_to_token().row(a), 16, m.window_table().row(a));
  m.release(a, 16);

  // The whole 16: its window (12..16) is held. A prefix of 10: its window (6..10) was kept
  // by the first insert. A prefix of 6 needs 2..6, 4 needs 0..4: given back, so only the
  // empty prefix is left.
  EXPECT_EQ(cache.match_prefix(tokens.data(), 16).length, 16);
  std::vector<int> other = tokens;
  other[10] = 99;
  RadixCache::Match at10 = cache.match_prefix(other.data(), 16);
  EXPECT_EQ(at10.length, 10);
  ASSERT_EQ(at10.window_slots.size(), 10u);
  for (int pos = 6; pos < 10; ++pos) EXPECT_NE(at10.window_slots[pos], 0) << pos;
  other[6] = 99;
  EXPECT_EQ(cache.match_prefix(other.data(), 16).length, 0);
  // Ignoring the window (a request locking its own path) the match goes as deep as the KV.
  EXPECT_EQ(cache.match_prefix(other.data(), 16, /*resumable_window=*/false).length, 6);

  // A request resumes from the 10-token prefix with the window slots it needs.
  const int b = m.req_to_token().alloc();
  RadixCache::Match hit = cache.match_prefix(tokens.data(), 10);
  ASSERT_EQ(hit.length, 10);
  cache.lock(hit.last);
  m.share_prefix(b, hit.slots.data(), hit.length, hit.window_slots.data());
  EXPECT_EQ(held_positions(m, b, 10), range(6, 10));
  // Evicting every window page of the tree frees only those nobody else holds: b's stay.
  const int64_t tree_pages = cache.window_pages();
  EXPECT_GT(tree_pages, 2);
  EXPECT_EQ(cache.evict_window(tree_pages), tree_pages - 2);
  EXPECT_EQ(cache.window_pages(), 0);
  EXPECT_EQ(cache.cached_pages(), 8);  // the full KV stays
  EXPECT_EQ(cache.match_prefix(tokens.data(), 16).length, 0);
  cache.unlock(hit.last);
  m.release(b, 10);
  EXPECT_TRUE(cache.flush());
  EXPECT_EQ(m.allocator().free_pages(), m.allocator().usable_pages());
  EXPECT_EQ(m.window_allocator().free_pages(), m.window_allocator().usable_pages());
}

TEST(WindowSpace, InsertGivesTheTreeBackWindowSlotsItHadGivenUp) {
  constexpr int kPage = 2, kWindow = 4;
  TokenMemory m(4, 64, 64, kPage, WindowSpace{kWindow, 32});
  RadixCache cache(m.allocator(), nullptr, &m.window_allocator(), kWindow);
  std::vector<int> tokens(8);
  std::iota(tokens.begin(), tokens.end(), 1);
  const int a = m.req_to_token().alloc();
  std::vector<int32_t> s(8), w(8);
  ASSERT_TRUE(m.extend(a, 0, 8, s.data(), w.data()));
  cache.insert(tokens.data(), m.req_to_token().row(a), 8, m.window_table().row(a));
  cache.evict_window(cache.window_pages());
  EXPECT_EQ(cache.match_prefix(tokens.data(), 8).length, 0);
  // The same request (still holding its window) offers the prefix again.
  cache.insert(tokens.data(), m.req_to_token().row(a), 8, m.window_table().row(a));
  EXPECT_EQ(cache.match_prefix(tokens.data(), 8).length, 8);
  m.release(a, 8);
  EXPECT_TRUE(cache.flush());
  EXPECT_EQ(m.window_allocator().free_pages(), m.window_allocator().usable_pages());
}

}  // namespace strata
