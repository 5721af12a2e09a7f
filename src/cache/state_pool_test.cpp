#include "cache/state_pool.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {

namespace {
RecurrentStateLayout mamba(int channels, int heads) {
  RecurrentStateLayout l;
  l.conv_channels = channels;
  l.conv_width = 3;
  l.num_heads = heads;
  l.head_dim = 2;
  l.state_size = 4;
  return l;
}
}  // namespace

TEST(StatePool, AnswersOnlyForTheLayersItHolds) {
  StatePool pool({{1, mamba(8, 2)}, {4, mamba(6, 3)}}, 2);
  EXPECT_EQ(pool.layer_ids(), (std::vector<int>{1, 4}));
  EXPECT_EQ(pool.layout(4).ssm_numel(), 3 * 2 * 4);
  const int slot = pool.alloc();
  for (int id : {0, 2, 5}) {
    try {
      pool.conv_state(id, slot);
      FAIL() << "layer " << id << " should be rejected";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer " + std::to_string(id)), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("[1, 4]"), std::string::npos) << e.what();
    }
  }
}

// A full pool refuses the next request with a message naming the limit and the flag, and the
// requests holding slots keep their state.
TEST(StatePool, RefusesBeyondItsSizeAndKeepsRunningRequests) {
  StatePool pool({{0, mamba(4, 1)}}, 2);
  const int a = pool.alloc(), b = pool.alloc();
  EXPECT_NE(a, b);
  pool.conv_state(0, a)[0] = 1.5f;
  std::vector<float> ssm(pool.layout(0).ssm_numel(), 0.0f);
  ssm[3] = -2.0f;
  pool.write_ssm(0, b, ssm.data());
  try {
    pool.alloc();
    FAIL() << "a third request must be refused";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-mamba-cache-size 2"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(pool.available(), 0);
  EXPECT_EQ(pool.conv_state(0, a)[0], 1.5f);
  std::fill(ssm.begin(), ssm.end(), 0.0f);
  pool.read_ssm(0, b, ssm.data());
  EXPECT_EQ(ssm[3], -2.0f);
  pool.free(a);
  const int c = pool.alloc();  // a freed slot comes back zeroed
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.conv_state(0, c)[0], 0.0f);
  EXPECT_THROW(pool.conv_state(0, 5), Error);  // not a slot of the pool
}

// The size the runner checks against the device budget before building the pool is the size
// the pool then takes, in either SSM dtype.
TEST(StatePool, BytesForIsWhatThePoolTakes) {
  const std::map<int, RecurrentStateLayout> layers = {{1, mamba(8, 2)}, {4, mamba(6, 3)}};
  for (DType dtype : {DType::F32, DType::BF16}) {
    StatePool pool(layers, 5, dtype);
    EXPECT_EQ(StatePool::bytes_for(layers, 5, dtype), pool.bytes());
  }
  EXPECT_EQ(StatePool::bytes_for(layers, 1, DType::F32),
            sizeof(float) * ((8 * 3 + 2 * 2 * 4) + (6 * 3 + 3 * 2 * 4)));
}

TEST(StatePool, Bf16StorageRoundsTheSsmState) {
  StatePool pool({{2, mamba(4, 1)}}, 1, parse_ssm_dtype("bfloat16"));
  const int s = pool.alloc();
  EXPECT_EQ(pool.ssm(2).dtype(), DType::BF16);
  std::vector<float> in(8), out(8);
  for (int i = 0; i < 8; ++i) in[i] = 1.0f + i / 3.0f;
  pool.write_ssm(2, s, in.data());
  pool.read_ssm(2, s, out.data());
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], in[i], 1e-2);
  EXPECT_THROW(parse_ssm_dtype("int8"), Error);
}

}  // namespace strata
