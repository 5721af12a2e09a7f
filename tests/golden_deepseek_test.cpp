// DeepSeek-V2-Lite (q_proj, kv_lora_rank 64 != v_head_dim 32, softmax greedy MoE) and
// DeepSeek-V3 (q_lora, sigmoid grouped router with correction bias) against Hugging Face
// transformers, with the invariances of golden_dense_test.cpp: batched = single, page size 16 =
// page size 1, chunked prefill = whole prefill, prefill + decode = full recompute. Plus the MLA
// memory contract: the decode path sizes its buffers from the latent pool (kv_lora_rank), and a
// config whose MLA dimensions are missing or inconsistent is refused before any weight is read.
#include <gtest/gtest.h>

#include "attention/cpu_backend.h"
#include "core/error.h"
#include "golden_suite.h"
#include "layers/mla_attention.h"
#include "model/json_util.h"
#include "models/registry.h"

namespace strata::test {

namespace {

using DeepseekGolden = GoldenTest;

}  // namespace

TEST_P(DeepseekGolden, LayersAreClassifiedAsMlaWithDenseThenMoE) {
  ASSERT_EQ(config_.layers.size(), 3u);
  for (const LayerSpec& l : config_.layers) EXPECT_EQ(l.attention, AttentionKind::MLA);
  EXPECT_EQ(config_.layers[0].mlp, MlpKind::Dense);  // first_k_dense_replace = 1
  EXPECT_EQ(config_.layers[1].mlp, MlpKind::MoE);
  EXPECT_EQ(config_.layers[2].mlp, MlpKind::MoE);
  // One latent row per token: c_kv (64) then the roped key part (16); the value is the c_kv.
  for (int id : runner_->kv_pool()->layer_ids()) {
    const KVLayerLayout& l = runner_->kv_pool()->layout(id);
    EXPECT_EQ(l.num_kv_heads, 1);
    EXPECT_EQ(l.k_head_dim, 64 + 16);
    EXPECT_EQ(l.v_head_dim, 64);
    EXPECT_TRUE(l.v_in_k);
  }
}

TEST_P(DeepseekGolden, PrefillLogitsMatchReference) {
  check_prefill_logits();
}

TEST_P(DeepseekGolden, GreedyBatchedAndSingleMatchReference) {
  check_greedy_batched_and_single();
}

TEST_P(DeepseekGolden, ChunkedPrefillEqualsWholePrefill) {
  check_chunked_prefill_equals_whole();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekGolden,
                         testing::ValuesIn(golden_cases({"deepseek_v2_lite", "deepseek_v3"})),
                         golden_case_name);

// DESIGN.md §1.2: the split-KV decode partials are [batch, heads, splits, Lv] with Lv the
// cached value width, kv_lora_rank (64) for this fixture, never v_head_dim (32). Forcing
// many splits (4 tokens each) must also leave the greedy continuation unchanged.
TEST(DeepseekDecode, PartialOutputBufferIsSizedByKvLoraRank) {
  const Reference ref = load_reference("deepseek_v2_lite");
  ModelRunner runner(ModelConfig::load(fixture_dir("deepseek_v2_lite")), default_options(16));
  ASSERT_EQ(runner.config().get_int("kv_lora_rank", 0), 64);
  ASSERT_EQ(runner.config().get_int("v_head_dim", 0), 32);
  auto* backend = dynamic_cast<CpuAttentionBackend*>(runner.attention());
  ASSERT_NE(backend, nullptr);
  backend->set_decode_split_tokens(4);
  const auto out = greedy(runner, ref.input_ids, 10, false);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].output_ids, ref.greedy_ids[i]) << i;
  const std::vector<int64_t>& shape = backend->decode_partial_shape();
  ASSERT_EQ(shape.size(), 4u);
  EXPECT_EQ(shape[0], static_cast<int64_t>(ref.input_ids.size()));  // the batch's last decode step
  EXPECT_EQ(shape[1], 4);                                           // q heads
  EXPECT_GT(shape[2], 1);                                           // several KV splits
  EXPECT_EQ(shape[3], 64);                                          // kv_lora_rank, not v_head_dim
}

namespace {

// A weight source that fails the test on any read: config validation must come first.
class NoReadsWeights : public WeightSource {
 public:
  bool has(const std::string&) const override { return true; }
  Tensor load(const std::string& name, const std::vector<int64_t>&) override {
    ADD_FAILURE() << "weight '" << name << "' was read before the config was validated";
    fail("weight read before validation");
  }
  const TensorInfo* info(const std::string&) const override { return nullptr; }
  std::vector<std::string> unused() const override { return {}; }
};

// Builds the model from the fixture's config.json with `edit` applied; returns the error text.
template <typename Edit>
std::string build_error(const std::string& fixture, Edit edit) {
  json cfg = read_json_file(fixture_dir(fixture) + "/config.json");
  edit(cfg);
  try {
    const ModelConfig config = ModelConfig::from_json(cfg, "config.json");
    NoReadsWeights weights;
    const auto ops = make_cpu_ops();
    ParamLoader loader(weights, *ops, false, 0);
    build_model(config, loader, StagePlan::whole(config));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST(DeepseekConfig, MissingKvLoraRankIsRejectedBeforeWeightsLoad) {
  for (const char* fixture : {"deepseek_v2_lite", "deepseek_v3"}) {
    const std::string err = build_error(fixture, [](json& c) { c.erase("kv_lora_rank"); });
    EXPECT_TRUE(contains(err, "kv_lora_rank")) << fixture << ": " << err;
    EXPECT_TRUE(contains(err, "missing")) << err;
  }
}

TEST(DeepseekConfig, InconsistentHeadDimensionsAreRejectedBeforeWeightsLoad) {
  std::string err = build_error("deepseek_v3", [](json& c) { c["qk_head_dim"] = 64; });
  EXPECT_TRUE(contains(
      err, "qk_head_dim 64 is inconsistent with qk_nope_head_dim 32 + qk_rope_head_dim 16"))
      << err;
  err = build_error("deepseek_v2_lite", [](json& c) { c["qk_rope_head_dim"] = 15; });
  EXPECT_TRUE(contains(err, "qk_rope_head_dim 15 must be even")) << err;
  err = build_error("deepseek_v2_lite", [](json& c) { c["v_head_dim"] = 0; });
  EXPECT_TRUE(contains(err, "v_head_dim")) << err;
  err = build_error("deepseek_v3", [](json& c) { c["topk_group"] = 3; });
  EXPECT_TRUE(contains(err, "topk_group 3 must be between 1 and n_group 2")) << err;
}

// The shape of DeepSeek-V3's published config.json (4.x spellings: rope_scaling with "type"):
// three dense layers, then MoE; YaRN with factor 40 whose softmax scale is
// 1/sqrt(192) * (0.1 ln 40 + 1)^2 = 0.1352338 (see mla_attention_test.cpp).
TEST(DeepseekConfig, PublishedV3ConfigClassifiesAndScales) {
  json cfg = read_json_file(fixture_dir("deepseek_v3") + "/config.json");
  cfg.erase("rope_parameters");
  cfg["num_hidden_layers"] = 8;
  cfg["first_k_dense_replace"] = 3;
  cfg["moe_layer_freq"] = 2;
  cfg["rope_theta"] = 10000;
  cfg["rope_scaling"] = {
      {"type", "yarn"},       {"factor", 40},   {"original_max_position_embeddings", 4096},
      {"beta_fast", 32},      {"beta_slow", 1}, {"mscale", 1.0},
      {"mscale_all_dim", 1.0}};
  const ModelConfig c = ModelConfig::from_json(cfg, "config.json");
  const MlpKind expected[8] = {MlpKind::Dense, MlpKind::Dense, MlpKind::Dense, MlpKind::Dense,
                               MlpKind::MoE,   MlpKind::Dense, MlpKind::MoE,   MlpKind::Dense};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(c.layers[i].attention, AttentionKind::MLA) << i;
    EXPECT_EQ(c.layers[i].mlp, expected[i]) << i;  // i >= 3 and i % 2 == 0
  }
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_NEAR(mla_softmax_scale(192, c.rope), 0.1352338, 1e-6);
}

// Two pipeline stages, [0, 1) and [1, 3): the second stage's latent pool holds layers 1 and 2
// only (DESIGN.md §1.1), and the prompt goes in two chunks so the second attends over a cached
// prefix there. Chained, the stages reproduce the reference logits.
TEST(DeepseekStages, TwoStagesMatchReference) {
  const Reference ref = load_reference("deepseek_v3");
  const ModelConfig config = ModelConfig::load(fixture_dir("deepseek_v3"));
  RunnerOptions first = default_options(16), last = default_options(16);
  first.stage = StagePlan{0, 1, true, false};
  last.stage = StagePlan{1, 3, false, true};
  ModelRunner a(config, first), b(config, last);
  EXPECT_EQ(a.kv_pool()->layer_ids(), (std::vector<int>{0}));
  EXPECT_EQ(b.kv_pool()->layer_ids(), (std::vector<int>{1, 2}));
  EXPECT_FALSE(b.kv_pool()->holds(0));

  const std::vector<int>& ids = ref.input_ids.back();
  const int n = static_cast<int>(ids.size()), vocab = config.vocab_size;
  // One request, tokens [begin, end) on top of `begin` cached ones, slots from `runner`'s memory.
  auto chunk = [&](ModelRunner& runner, int row, int begin, int end) {
    ForwardBatch batch;
    batch.return_all_logits = true;
    std::vector<int32_t> slots(end - begin);
    EXPECT_TRUE(runner.memory().extend(row, begin, end, slots.data()));
    batch.req_pool_indices = {row};
    batch.prefix_lens = {begin};
    batch.extend_lens = {end - begin};
    batch.state_slots = {row};
    for (int i = begin; i < end; ++i) {
      batch.input_ids.push_back(ids[i]);
      batch.positions.push_back(i);
      batch.out_cache_loc.push_back(slots[i - begin]);
    }
    return batch;
  };
  const int row_a = a.memory().req_to_token().alloc(), row_b = b.memory().req_to_token().alloc();
  for (auto [begin, end] : {std::pair{0, n / 2}, std::pair{n / 2, n}}) {
    const ForwardBatch batch_a = chunk(a, row_a, begin, end), batch_b = chunk(b, row_b, begin, end);
    const Tensor hidden = a.forward(batch_a);
    const Tensor logits = b.forward(batch_b, hidden);
    ASSERT_EQ(logits.dim(0), end - begin);
    EXPECT_LE(
        max_abs_diff(logits.data(), ref.logits.back().row(begin), int64_t{end - begin} * vocab),
        1e-3)
        << "tokens [" << begin << ", " << end << ")";
  }
}

}  // namespace strata::test
