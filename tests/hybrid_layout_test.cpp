// Layout robustness of the hybrid cache: tiny models generated over layer patterns (attention
// first, attention last, no attention, attention only, consecutive attention layers, no MLP)
// with random weights, run through prefill + decode and compared with recomputing everything
// in one pass. No layer number is special: every pattern must hold the same invariances. Also:
// a full recurrent-state pool refuses the next request and loses none of the running ones.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "models/registry.h"
#include "random_model.h"
#include "test_util.h"

namespace strata::test {

namespace {

namespace fs = std::filesystem;

json common() {
  return {{"vocab_size", 64},
          {"hidden_size", 32},
          {"intermediate_size", 48},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 8},
          {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", 256},
          {"tie_word_embeddings", false},
          {"time_step_limit", {0.0, {{"__float__", "Infinity"}}}}};
}

json nemotron_h(const std::string& pattern) {
  json j = common();
  j.update({{"architectures", {"NemotronHForCausalLM"}},
            {"model_type", "nemotron_h"},
            {"hybrid_override_pattern", pattern},
            {"num_hidden_layers", pattern.size()},
            {"mamba_num_heads", 4},
            {"mamba_head_dim", 8},
            {"n_groups", 2},
            {"ssm_state_size", 8},
            {"conv_kernel", 4},
            {"chunk_size", 4},
            {"layer_norm_epsilon", 1e-5},
            {"mlp_hidden_act", "relu2"},
            {"use_conv_bias", true},
            {"use_bias", false}});
  return j;
}

json mamba_family(const std::string& arch, const std::string& type, int layers) {
  json j = common();
  j.update({{"architectures", {arch}},
            {"model_type", type},
            {"num_hidden_layers", layers},
            {"mamba_n_heads", 4},
            {"mamba_d_head", 8},
            {"mamba_n_groups", 2},
            {"mamba_d_state", 8},
            {"mamba_d_conv", 4},
            {"mamba_chunk_size", 4},
            {"mamba_expand", 1},
            {"mamba_conv_bias", true},
            {"mamba_proj_bias", false},
            {"hidden_act", "silu"},
            {"rope_theta", 10000.0}});
  return j;
}

json bamba(std::vector<int> attention_layers, int layers) {
  json j = mamba_family("BambaForCausalLM", "bamba", layers);
  j["attn_layer_indices"] = attention_layers;
  j["partial_rotary_factor"] = 0.5;
  return j;
}

json falcon_h1() {
  json j = mamba_family("FalconH1ForCausalLM", "falcon_h1", 2);
  // Non-trivial muP multipliers, so each one is exercised.
  j.update({{"mamba_d_ssm", 32},
            {"mamba_rms_norm", true},
            {"mamba_norm_before_gate", false},
            {"embedding_multiplier", 1.5},
            {"lm_head_multiplier", 0.75},
            {"key_multiplier", 0.5},
            {"attention_in_multiplier", 1.25},
            {"attention_out_multiplier", 0.8},
            {"ssm_in_multiplier", 1.1},
            {"ssm_out_multiplier", 0.9},
            {"ssm_multipliers", {0.7, 1.2, 0.9, 1.1, 0.6}},
            {"mlp_multipliers", {0.9, 1.3}}});
  return j;
}

struct Layout {
  std::string name;
  json config;
  friend void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }
};

std::vector<Layout> layouts() {
  return {
      {"nemotron_attention_first", nemotron_h("*M-M-")},
      {"nemotron_attention_last", nemotron_h("M-M-*")},
      {"nemotron_no_attention", nemotron_h("MM-M")},
      {"nemotron_attention_only", nemotron_h("*-*-")},
      {"nemotron_consecutive_attention", nemotron_h("M**-M")},
      {"nemotron_mlp_free", nemotron_h("M*M*M")},
      {"bamba_attention_first", bamba({0}, 3)},
      {"bamba_attention_last", bamba({2}, 3)},
      {"bamba_no_attention", bamba({}, 2)},
      {"bamba_consecutive_attention", bamba({1, 2}, 4)},
      {"falcon_h1_parallel", falcon_h1()},
  };
}

std::vector<std::vector<int>> prompts() {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> tok(3, 63);
  std::vector<std::vector<int>> out;
  for (int len : {1, 6, 11, 17}) {
    std::vector<int> p(len);
    for (auto& t : p) t = tok(rng);
    out.push_back(p);
  }
  return out;
}

class HybridLayout : public testing::TestWithParam<Layout> {
 protected:
  void SetUp() override { dir_ = make_model(GetParam().name, GetParam().config, 1234); }
  std::string dir_;
};

}  // namespace

TEST_P(HybridLayout, PrefillAndDecodeEqualFullRecompute) {
  const ModelConfig config = ModelConfig::load(dir_);
  const int vocab = config.vocab_size;
  for (int page_size : {1, 4}) {
    ModelRunner runner(config, default_options(page_size));
    EXPECT_EQ(runner.kv_pool() != nullptr, !config.attention_layer_ids().empty());
    EXPECT_EQ(runner.state_pool() != nullptr, !config.recurrent_layer_ids().empty());
    const auto ps = prompts();
    const auto batched = greedy(runner, ps, 8);
    const auto chunked = greedy(runner, ps, 8, true, 3);
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto single = greedy(runner, {ps[i]}, 8);
      std::vector<int> all = ps[i];
      all.insert(all.end(), batched[i].output_ids.begin(), batched[i].output_ids.end() - 1);
      const Tensor recompute = prefill_all_logits(runner, all);
      double logit_scale = 0;
      for (int64_t j = 0; j < recompute.numel(); ++j)
        logit_scale = std::max(logit_scale, double(std::fabs(recompute.data()[j])));
      EXPECT_GT(logit_scale, 0.5) << "random weights this small could hide a wrong state";
      const int first = static_cast<int>(ps[i].size()) - 1;
      for (int s = 0; s < 8; ++s) {
        const float* want = recompute.row(first + s);
        EXPECT_LE(max_abs_diff(batched[i].logits[s].data(), want, vocab), 1e-4)
            << "page " << page_size << " prompt " << i << " step " << s << " batched";
        EXPECT_LE(max_abs_diff(single[0].logits[s].data(), want, vocab), 1e-4)
            << "page " << page_size << " prompt " << i << " step " << s << " single";
        EXPECT_LE(max_abs_diff(chunked[i].logits[s].data(), want, vocab), 1e-4)
            << "page " << page_size << " prompt " << i << " step " << s << " chunked prefill";
      }
      for (int chunk : {1, 5}) {
        const Tensor pieces = prefill_all_logits(runner, all, chunk);
        EXPECT_LE(max_abs_diff(pieces, recompute), 1e-4)
            << "page " << page_size << " prompt " << i << " chunk " << chunk;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Patterns, HybridLayout, testing::ValuesIn(layouts()),
                         [](const testing::TestParamInfo<Layout>& info) {
                           return info.param.name;
                         });

// With room for two requests' state, a third is refused with a clear error while the two keep
// decoding exactly as if nothing had happened; generate() refuses a batch that does not fit
// and leaves the pools as it found them.
TEST(HybridStatePool, FullPoolRefusesNewRequestAndLosesNoRunningOne) {
  const std::string dir = make_model("pool", nemotron_h("M*-M"), 77);
  const ModelConfig config = ModelConfig::load(dir);
  RunnerOptions o = default_options();
  o.max_mamba_cache_size = 2;
  ModelRunner runner(config, o);
  ModelRunner reference(config, default_options());
  const auto ps = prompts();
  const auto want = greedy(reference, {ps[1], ps[2]}, 5);

  // Two running requests, driven step by step.
  struct Req {
    int row, slot;
    std::vector<int> tokens;
    int cached = 0;
  };
  std::vector<Req> reqs;
  for (int i : {1, 2})
    reqs.push_back({runner.memory().req_to_token().alloc(), runner.state_pool()->alloc(), ps[i]});
  auto step = [&](ForwardMode mode) {
    ForwardBatch b;
    b.mode = mode;
    for (auto& r : reqs) {
      const int n = static_cast<int>(r.tokens.size()) - r.cached;
      std::vector<int32_t> slots(n);
      EXPECT_TRUE(runner.memory().extend(r.row, r.cached, r.cached + n, slots.data()));
      b.req_pool_indices.push_back(r.row);
      b.prefix_lens.push_back(r.cached);
      b.extend_lens.push_back(n);
      b.state_slots.push_back(r.slot);
      for (int k = 0; k < n; ++k) {
        b.input_ids.push_back(r.tokens[r.cached + k]);
        b.positions.push_back(r.cached + k);
        b.out_cache_loc.push_back(slots[k]);
      }
      r.cached += n;
    }
    const Tensor logits = runner.forward(b);
    for (size_t k = 0; k < reqs.size(); ++k) {
      const float* l = logits.row(static_cast<int64_t>(k));
      reqs[k].tokens.push_back(static_cast<int>(std::max_element(l, l + config.vocab_size) - l));
    }
  };
  step(ForwardMode::Extend);
  step(ForwardMode::Decode);

  try {
    runner.state_pool()->alloc();
    FAIL() << "a third request must not get recurrent state";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-mamba-cache-size 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(greedy(runner, {ps[0]}, 2), RequestError);  // the generator is refused the same way
  EXPECT_EQ(runner.state_pool()->available(), 0);

  step(ForwardMode::Decode);
  step(ForwardMode::Decode);
  step(ForwardMode::Decode);
  for (size_t k = 0; k < reqs.size(); ++k) {
    const std::vector<int> generated(reqs[k].tokens.end() - 5, reqs[k].tokens.end());
    EXPECT_EQ(generated, want[k].output_ids) << "running request " << k;
  }
  for (auto& r : reqs) {
    runner.memory().release(r.row, r.cached);
    runner.state_pool()->free(r.slot);
  }

  // A batch larger than the pool is refused whole and returns what it took.
  EXPECT_THROW(greedy(runner, {ps[0], ps[1], ps[2]}, 2), RequestError);
  EXPECT_EQ(runner.state_pool()->available(), 2);
  EXPECT_EQ(runner.memory().req_to_token().available(), o.max_running_requests);
  const auto again = greedy(runner, {ps[1], ps[2]}, 5);
  for (size_t k = 0; k < again.size(); ++k) EXPECT_EQ(again[k].output_ids, want[k].output_ids);
}

}  // namespace strata::test
