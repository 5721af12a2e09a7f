#include "model/shard.h"

#include <gtest/gtest.h>

#include "model/config.h"

namespace strata {

TEST(Shard, PiecesCoverTheDimensionOnceWithTheLastNarrower) {
  // 10 over 4: pieces of 3, 3, 3, 1.
  int64_t covered = 0;
  for (int r = 0; r < 4; ++r) {
    const Shard s{r, 4};
    EXPECT_EQ(s.begin(10), covered);
    covered += s.size(10);
  }
  EXPECT_EQ(covered, 10);
  EXPECT_EQ((Shard{3, 4}.size(10)), 1);
  EXPECT_EQ((Shard{1, 2}.begin(512)), 256);
  EXPECT_TRUE(Shard{}.whole());
}

TEST(Shard, KvHeadsSplitOrReplicate) {
  // 4 KV heads over 2 ranks: two each.
  EXPECT_EQ(head_group_shard(4, 1, 2).begin(4), 2);
  EXPECT_EQ(head_group_shard(4, 1, 2).size(4), 2);
  // 2 KV heads over 4 ranks: ranks 0, 1 hold head 0; ranks 2, 3 head 1 (query heads 2r, 2r+1
  // ... each rank's one query head reads the KV head of its group).
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(head_group_shard(2, r, 4).begin(2), r / 2) << r;
    EXPECT_EQ(head_group_shard(2, r, 4).size(2), 1) << r;
  }
}

TEST(Shard, ProblemsNameTheFieldAndTheSizesThatWork) {
  ModelConfig c;
  c.model_dir = "m";
  c.num_attention_heads = 6;
  c.num_kv_heads = 2;
  c.intermediate_size = 12;
  c.vocab_size = 100;
  c.layers.resize(2);
  c.layers[0].attention = AttentionKind::Full;
  EXPECT_FALSE(tensor_parallel_problem(c, 1));
  EXPECT_FALSE(tensor_parallel_problem(c, 2));
  EXPECT_FALSE(tensor_parallel_problem(c, 6));  // 2 KV heads replicated 3 times
  EXPECT_EQ(tensor_parallel_problem(c, 4).value_or(""),
            "--tp-size 4: in m/config.json num_attention_heads 6 is not divisible by it; tensor "
            "parallelism splits every layer evenly over the ranks: use --tp-size 1 or 2 or 6");
  c.num_kv_heads = 4;  // neither divides nor is divided by 6
  EXPECT_EQ(tensor_parallel_problem(c, 6).value_or(""),
            "--tp-size 6: in m/config.json num_key_value_heads 4 is neither a multiple nor a "
            "divisor of it (KV heads are split, or replicated when there are fewer than ranks); "
            "tensor parallelism splits every layer evenly over the ranks: use --tp-size 1 or 2");
}

}  // namespace strata
