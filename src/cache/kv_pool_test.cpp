#include "cache/kv_pool.h"

#include <gtest/gtest.h>

#include "cache/req_to_token_pool.h"
#include "core/error.h"
#include "ops/ops.h"

namespace strata {

TEST(KVPool, AnswersOnlyForTheLayersItHolds) {
  std::map<int, KVLayerLayout> layers;
  for (int id = 3; id < 7; ++id) layers[id] = KVLayerLayout{2, 8, 8, false};
  auto ops = make_cpu_ops();
  KVPool pool(layers, 32, *ops);
  for (int id = 3; id < 7; ++id) {
    EXPECT_TRUE(pool.holds(id));
    EXPECT_NE(pool.k_buffer(id).raw(), nullptr);
    EXPECT_EQ(pool.k_buffer(id).dtype(), DType::F32);
    EXPECT_EQ(pool.layout(id).k_width(), 16);
  }
  for (int id : {0, 2, 7}) {
    EXPECT_FALSE(pool.holds(id));
    try {
      pool.k_buffer(id);
      FAIL() << "layer " << id << " should be rejected";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("layer " + std::to_string(id)), std::string::npos) << msg;
      EXPECT_NE(msg.find("[3, 4, 5, 6]"), std::string::npos) << msg;
    }
  }
}

TEST(KVPool, ValueInsideKeyLayoutSharesStorage) {
  auto ops = make_cpu_ops();
  KVPool pool({{5, KVLayerLayout{1, 12, 8, true}}}, 4, *ops);
  EXPECT_EQ(pool.v_buffer(5).raw(), pool.k_buffer(5).raw());
  EXPECT_EQ(pool.layout(5).v_row_stride(), 12);
  std::vector<float> k(12);
  for (int i = 0; i < 12; ++i) k[i] = static_cast<float>(i);
  int32_t slot = 2;
  pool.store(5, &slot, 1, k.data(), nullptr);
  EXPECT_EQ(pool.v_buffer(5).ptr<float>()[2 * 12 + 7], 7.0f);
  EXPECT_EQ(pool.bytes(), 4u * 12 * sizeof(float));  // the value costs nothing
}

TEST(TokenMemory, PagesAreFilledInOrderAndSlotZeroIsNeverUsed) {
  TokenMemory mem(2, 64, 64, 16);
  const int r = mem.req_to_token().alloc();
  std::vector<int32_t> slots(20);
  ASSERT_TRUE(mem.extend(r, 0, 20, slots.data()));
  for (int i = 0; i < 20; ++i) {
    EXPECT_GE(slots[i], 16) << "page 0 is reserved";
    EXPECT_EQ(slots[i] % 16, i % 16);
  }
  int32_t next;
  ASSERT_TRUE(mem.extend(r, 20, 21, &next));
  EXPECT_EQ(next, slots[19] + 1);  // continues the request's last page
  const int64_t free_before = mem.allocator().free_pages();
  mem.release(r, 21);
  EXPECT_EQ(mem.allocator().free_pages(), free_before + 2);
}

TEST(TokenMemory, RefusesWhenPagesRunOutAndAllocatesNothing) {
  TokenMemory mem(2, 64, 32, 16);  // two usable pages
  const int a = mem.req_to_token().alloc();
  std::vector<int32_t> slots(64);
  ASSERT_TRUE(mem.extend(a, 0, 20, slots.data()));
  const int b = mem.req_to_token().alloc();
  EXPECT_FALSE(mem.extend(b, 0, 17, slots.data()));
  EXPECT_EQ(mem.allocator().free_pages(), 0);
  EXPECT_THROW(TokenSlotAllocator(16, 0), Error);
}

}  // namespace strata
