#include "runtime/generation_state.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 8;
  c.eos_token_ids = {2};
  return c;
}

GenerateRequest request(std::vector<int> ids, int max_new_tokens) {
  GenerateRequest r;
  r.input_ids = std::move(ids);
  r.sampling.max_new_tokens = max_new_tokens;
  r.sampling.stop_at_eos = true;
  return r;
}

// Logits whose greedy choice is `token` in every row.
Tensor choose(int rows, int token) {
  Tensor t({rows, 8});
  for (int r = 0; r < rows; ++r) t.row(r)[token] = 1.0f;
  return t;
}

TEST(MicroBatches, ContiguousGroupsDifferingByAtMostOne) {
  EXPECT_EQ(split_into_micro_batches(5, 2), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(split_into_micro_batches(5, 4), (std::vector<std::vector<int>>{{0, 1}, {2}, {3}, {4}}));
  EXPECT_EQ(split_into_micro_batches(2, 4), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_EQ(split_into_micro_batches(3, 0), (std::vector<std::vector<int>>{{0, 1, 2}}));
}

// Prompts are read first (in chunks when asked), and only then does the group decode, one
// token per request per pass, in Decode mode.
TEST(GenerationState, PrefillsInChunksThenDecodes) {
  const ModelConfig config = tiny_config();
  TokenMemory memory(4, 64, 256, 1);
  const std::vector<GenerateRequest> requests = {request({1, 3, 4, 5, 6}, 3), request({7}, 3)};
  GenerateOptions options;
  options.chunked_prefill_size = 3;
  GenerationState state(config, memory, nullptr, requests, options);
  const std::vector<int> everyone = {0, 1};
  std::vector<int> members;

  ForwardBatch b = state.next_batch(everyone, &members);
  EXPECT_EQ(b.mode, ForwardMode::Extend);
  EXPECT_EQ(members, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.extend_lens, (std::vector<int32_t>{3, 1}));
  auto tokens = state.sample(members, choose(2, 4));
  EXPECT_EQ(tokens, (std::vector<int32_t>{-1, 4}));  // request 0 is mid-prompt
  state.accept(members, tokens, nullptr);

  // Request 1 has its first token but waits while request 0 finishes its prompt.
  b = state.next_batch(everyone, &members);
  EXPECT_EQ(b.mode, ForwardMode::Extend);
  EXPECT_EQ(members, (std::vector<int>{0}));
  EXPECT_EQ(b.prefix_lens, (std::vector<int32_t>{3}));
  EXPECT_EQ(b.extend_lens, (std::vector<int32_t>{2}));
  state.accept(members, state.sample(members, choose(1, 5)), nullptr);

  b = state.next_batch(everyone, &members);
  EXPECT_EQ(b.mode, ForwardMode::Decode);
  EXPECT_EQ(members, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{5, 1}));
  state.accept(members, {2, 6}, nullptr);  // request 0 meets EOS

  b = state.next_batch(everyone, &members);
  EXPECT_EQ(members, (std::vector<int>{1}));
  state.accept(members, {6}, nullptr);
  EXPECT_TRUE(state.all_done());
  b = state.next_batch(everyone, &members);
  EXPECT_TRUE(members.empty());

  const auto out = state.outputs();
  EXPECT_EQ(out[0].output_ids, (std::vector<int>{5, 2}));
  EXPECT_EQ(out[0].finish_reason, "stop");
  EXPECT_EQ(out[1].output_ids, (std::vector<int>{4, 6, 6}));
  EXPECT_EQ(out[1].finish_reason, "length");
  EXPECT_EQ(state.stats().decode_tokens, 3);
}

// Groups are independent: one group's batches hold only its own requests.
TEST(GenerationState, GroupsBuildSeparateBatches) {
  const ModelConfig config = tiny_config();
  TokenMemory memory(4, 64, 256, 1);
  const std::vector<GenerateRequest> requests = {request({1, 3}, 2), request({4}, 2),
                                                 request({5, 6, 7}, 2)};
  GenerationState state(config, memory, nullptr, requests, GenerateOptions{});
  std::vector<int> members;
  ForwardBatch b = state.next_batch({2}, &members);
  EXPECT_EQ(members, (std::vector<int>{2}));
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{5, 6, 7}));
  b = state.next_batch({0, 1}, &members);
  EXPECT_EQ(members, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.num_tokens(), 3);
}

TEST(GenerationState, TooManyRequestsForTheMemoryIsAnError) {
  const ModelConfig config = tiny_config();
  TokenMemory memory(1, 64, 256, 1);
  const std::vector<GenerateRequest> requests = {request({1}, 2), request({4}, 2)};
  EXPECT_THROW(GenerationState state(config, memory, nullptr, requests, GenerateOptions{}), Error);
  EXPECT_EQ(memory.req_to_token().available(), 1);  // the row taken before failing came back
}

}  // namespace
}  // namespace strata
