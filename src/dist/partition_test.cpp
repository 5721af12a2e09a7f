#include "dist/partition.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {
namespace {

std::vector<int> sizes(const std::vector<StagePlan>& stages) {
  std::vector<int> out;
  for (const auto& s : stages) out.push_back(s.end_layer - s.start_layer);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Partition, EvenSplitPutsTheRemainderOnTheLastStages) {
  EXPECT_EQ(sizes(partition_layers(4, 2)), (std::vector<int>{2, 2}));
  EXPECT_EQ(sizes(partition_layers(4, 3)), (std::vector<int>{1, 1, 2}));
  EXPECT_EQ(sizes(partition_layers(10, 4)), (std::vector<int>{2, 2, 3, 3}));
  EXPECT_EQ(sizes(partition_layers(7, 7)), (std::vector<int>(7, 1)));
  EXPECT_EQ(sizes(partition_layers(5, 1)), (std::vector<int>{5}));
}

TEST(Partition, StagesAreContiguousAndKnowTheirEnds) {
  const auto stages = partition_layers(10, 4);
  ASSERT_EQ(stages.size(), 4u);
  int next = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    EXPECT_EQ(stages[k].start_layer, next);
    next = stages[k].end_layer;
    EXPECT_EQ(stages[k].is_first, k == 0);
    EXPECT_EQ(stages[k].is_last, k == 3);
  }
  EXPECT_EQ(next, 10);
  EXPECT_EQ(describe_partition(stages), "[0, 2) [2, 4) [4, 7) [7, 10)");
  const auto whole = partition_layers(3, 1);
  EXPECT_TRUE(whole[0].is_first && whole[0].is_last);
}

TEST(Partition, ExplicitCountsAreUsedAsGiven) {
  const auto stages = partition_layers(8, 3, {1, 5, 2});
  EXPECT_EQ(sizes(stages), (std::vector<int>{1, 5, 2}));
  EXPECT_EQ(stages[1].start_layer, 1);
  EXPECT_EQ(stages[2].start_layer, 6);
}

TEST(Partition, MismatchesAreClearErrors) {
  EXPECT_NE(
      error_of([] { partition_layers(4, 5); }).find("--pp-size 5 is larger than the model's 4"),
      std::string::npos);
  EXPECT_NE(error_of([] { partition_layers(4, 0); }).find("--pp-size must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              partition_layers(8, 2, {4, 3, 1});
            }).find("has 3 entries but --pp-size is 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              partition_layers(8, 2, {4, 3});
            }).find("covers 7 layers but the model has 8"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              partition_layers(8, 2, {8, 0});
            }).find("stage 1 gets 0 layers"),
            std::string::npos);
}

TEST(Partition, ParsesCommaSeparatedCounts) {
  EXPECT_EQ(parse_layer_partition("2,3,3"), (std::vector<int>{2, 3, 3}));
  EXPECT_EQ(parse_layer_partition("4"), (std::vector<int>{4}));
  for (const char* bad : {"", "2,,3", "2,x", "2,-1", "0,4", "2.5,1", "3,"})
    EXPECT_NE(error_of([&] { parse_layer_partition(bad); }).find("is not a positive layer count"),
              std::string::npos)
        << bad;
}

}  // namespace
}  // namespace strata
