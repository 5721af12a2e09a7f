// The windows of `strata perplexity` (runtime/perplexity.h): which tokens each feeds and
// scores, for overlapping, disjoint and single windows, and the flag checks.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {
namespace {

std::vector<std::tuple<int, int, int>> spans(int n, int ctx, int stride) {
  std::vector<std::tuple<int, int, int>> out;
  for (const auto& w : perplexity_windows(n, ctx, stride))
    out.emplace_back(w.begin, w.end, w.first);
  return out;
}

TEST(PerplexityWindows, OverlappingWindowsScoreEveryTokenButTheFirstOnce) {
  using T = std::vector<std::tuple<int, int, int>>;
  EXPECT_EQ(spans(10, 4, 2), (T{{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}}));
  for (int n : {2, 3, 17, 100})
    for (int ctx : {2, 5, 16})
      for (int stride = 1; stride < ctx; ++stride) {
        std::vector<int> scored(n, 0);
        for (const auto& w : perplexity_windows(n, ctx, stride)) {
          EXPECT_LE(w.end - w.begin, ctx);
          EXPECT_GT(w.first, w.begin);
          for (int t = w.first; t < w.end; ++t) {
            ++scored[t];
            // Every target has ctx - stride tokens before it in its window, or all of them.
            EXPECT_GE(t - w.begin, std::min(t, ctx - stride));
          }
        }
        EXPECT_EQ(scored[0], 0);
        for (int t = 1; t < n; ++t) EXPECT_EQ(scored[t], 1) << n << " " << ctx << " " << stride;
      }
}

TEST(PerplexityWindows, DisjointWindowsSkipEachWindowsFirstToken) {
  using T = std::vector<std::tuple<int, int, int>>;
  EXPECT_EQ(spans(10, 4, 4), (T{{0, 4, 1}, {4, 8, 5}, {8, 10, 9}}));
  EXPECT_EQ(spans(9, 4, 4), (T{{0, 4, 1}, {4, 8, 5}}));  // [8, 9) would score nothing
  EXPECT_EQ(spans(3, 8, 4), (T{{0, 3, 1}}));
}

TEST(PerplexityWindows, RejectsBadArguments) {
  EXPECT_THROW(perplexity_windows(1, 4, 2), Error);
  EXPECT_THROW(perplexity_windows(10, 1, 1), Error);
  EXPECT_THROW(perplexity_windows(10, 4, 0), Error);
  EXPECT_THROW(perplexity_windows(10, 4, 5), Error);
}

}  // namespace
}  // namespace strata
