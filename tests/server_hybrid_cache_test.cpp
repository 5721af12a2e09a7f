// End-to-end tests of prefix caching for hybrid attention + Mamba2 models over HTTP on
// 127.0.0.1: for NemotronH, Bamba and Falcon-H1, both --mamba-radix-cache-strategy settings
// and page sizes 1 and 16, a conversation's next turn and a shared mid-sequence prefix hit
// the cache as each strategy promises (usage and /metrics say so) without changing a token
// or a logprob; many concurrent requests under a tiny KV cache all finish; every pool, the
// recurrent-state pool included, is back to empty after /flush_cache; `strata serve` refuses
// bad Mamba cache flags before loading weights.
#include <gtest/gtest.h>

#include <thread>
#include <tuple>

#include "hybrid_cache_setup.h"
#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

constexpr int kTrackInterval = 32;

RunnerOptions hybrid_options(const std::string& strategy, int page, int max_running = 8) {
  return test::hybrid_cache_options(strategy, page, max_running, kTrackInterval);
}

using test::concat;

std::vector<int> tokens(int n, int seed) {
  return test::synthetic_tokens(n, seed);
}

json generate(const std::vector<int>& ids, int n) {
  return {{"input_ids", ids},
          {"return_logprob", true},
          {"sampling_params", {{"max_new_tokens", n}, {"temperature", 0}, {"ignore_eos", true}}}};
}

json completion(const std::string& model, const std::vector<int>& ids, int n) {
  return {{"model", model},   {"prompt", ids},      {"max_tokens", n},
          {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 0}};
}

// What a test compares between cache on and off: tokens, their logprobs, and the hit.
struct Answer {
  std::vector<int> ids;
  std::vector<float> logprobs;
  int cached_tokens = 0;
};

Answer from_generate(const json& body) {
  Answer a;
  a.ids = body.at("output_ids").get<std::vector<int>>();
  for (const auto& lp : body["meta_info"]["output_token_logprobs"]) a.logprobs.push_back(lp[0]);
  a.cached_tokens = body["meta_info"]["cached_tokens"];
  return a;
}

Answer from_completion(const json& body) {
  Answer a;
  a.ids = body["choices"][0]["token_ids"].get<std::vector<int>>();
  a.logprobs = body["choices"][0]["logprobs"]["token_logprobs"].get<std::vector<float>>();
  a.cached_tokens = body["usage"]["prompt_tokens_details"]["cached_tokens"];
  return a;
}

void expect_same(const Answer& with, const Answer& without, const std::string& what) {
  EXPECT_EQ(with.ids, without.ids) << what;
  ASSERT_EQ(with.logprobs.size(), without.logprobs.size()) << what;
  for (size_t t = 0; t < with.logprobs.size(); ++t)
    EXPECT_NEAR(with.logprobs[t], without.logprobs[t], 1e-5) << what << " token " << t;
}

}  // namespace

using HybridServer = test::HybridCacheTest;

// Three requests in turn: a prompt; the conversation's next turn (prompt + answer + more),
// which resumes where the first request ended, rounded down to a page; and a prompt sharing
// only the first's first 60 tokens, which hits extra_buffer's checkpoint at 32 and nothing
// with no_buffer. The cache off gives the same tokens and logprobs.
TEST_P(HybridServer, PrefixHitsOverHttpChangeNothing) {
  const std::vector<int> shared = tokens(60, 1), first = concat(shared, tokens(14, 2));
  const std::vector<int> mid = concat(shared, tokens(9, 3));
  Answer answers[2][3];
  for (bool disable : {false, true}) {
    SchedulerOptions o;
    o.disable_radix_cache = disable;
    test::Harness h(fixture(), hybrid_options(strategy(), page()), o);
    auto [s1, b1] = h.post("/generate", generate(first, 8));
    ASSERT_EQ(s1, 200) << b1.dump();
    answers[disable][0] = from_generate(b1);
    const std::vector<int> next = concat(concat(first, answers[disable][0].ids), tokens(5, 4));
    auto [s2, b2] = h.post("/v1/completions", completion(fixture(), next, 8));
    ASSERT_EQ(s2, 200) << b2.dump();
    answers[disable][1] = from_completion(b2);
    auto [s3, b3] = h.post("/generate", generate(mid, 8));
    ASSERT_EQ(s3, 200) << b3.dump();
    answers[disable][2] = from_generate(b3);

    const Answer* a = answers[disable];
    const int fed = static_cast<int>(first.size()) + 8 - 1;  // the last token is never fed
    const int follow_up = disable ? 0 : fed / page() * page();
    const int mid_hit = disable || strategy() == "no_buffer" ? 0 : kTrackInterval;
    EXPECT_EQ(a[0].cached_tokens, 0) << name();
    EXPECT_EQ(a[1].cached_tokens, follow_up) << name();
    EXPECT_EQ(a[2].cached_tokens, mid_hit) << name();
    EXPECT_EQ(h.metric("strata:cached_tokens_total"), follow_up + mid_hit) << name();
    if (!disable) {
      EXPECT_GT(h.metric("strata:cache_hit_rate"), 0.2) << name();
      EXPECT_GT(h.metric("strata:radix_cache_mamba_slots"), 0) << name();
    }
    h.expect_pools_empty();
  }
  for (int i = 0; i < 3; ++i)
    expect_same(answers[0][i], answers[1][i], name() + " request " + std::to_string(i));
}

INSTANTIATE_TEST_SUITE_P(Hybrids, HybridServer, test::mamba2_cache_setups(),
                         test::hybrid_cache_setup_name);

namespace {

// Answers to `prompts`, all sent at once.
std::vector<json> post_all(const test::Harness& h, const std::vector<std::vector<int>>& prompts,
                           int n) {
  std::vector<json> out(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] { out[i] = h.post("/generate", generate(prompts[i], n)).second; });
  for (auto& t : clients) t.join();
  return out;
}

}  // namespace

// 40 concurrent requests over 5 shared prefixes against a KV cache of 256 tokens and a small
// state pool: requests are retracted and resumed, snapshots evicted; every request gets the
// tokens it gets with memory to spare and no cache, and nothing leaks.
TEST(HybridServerLoad, ManyConcurrentRequestsUnderATinyKVCacheAllFinish) {
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 40; ++k) prompts.push_back(concat(tokens(34, k % 5), tokens(2 + k % 7, k)));
  for (int page : {1, 16}) {
    std::vector<json> roomy;
    {
      SchedulerOptions o;
      o.disable_radix_cache = true;
      test::Harness h("nemotron_h", hybrid_options("auto", page, 40), o);
      roomy = post_all(h, prompts, 10);
    }
    for (const std::string strategy : {"no_buffer", "extra_buffer"}) {
      const std::string what = strategy + " page " + std::to_string(page);
      RunnerOptions ro = hybrid_options(strategy, page, 16);
      ro.max_total_tokens = 256;
      ro.max_mamba_cache_size = 20;
      SchedulerOptions o;
      o.chunked_prefill_size = 64;
      test::Harness h("nemotron_h", ro, o);
      const std::vector<json> tight = post_all(h, prompts, 10);
      for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_TRUE(tight[i].contains("output_ids")) << what << " " << i << tight[i].dump();
        EXPECT_EQ(tight[i]["output_ids"], roomy[i]["output_ids"]) << what << " request " << i;
      }
      EXPECT_GT(h.metric("strata:num_retractions_total"), 0) << what;
      // The prompts share 34 tokens: extra_buffer's checkpoint at 32 serves them.
      if (strategy == "extra_buffer") {
        EXPECT_GT(h.metric("strata:cached_tokens_total"), 0) << what;
      }
      h.expect_pools_empty();
    }
  }
}

TEST(HybridServerLoad, ServeRefusesBadMambaCacheFlagsBeforeLoading) {
  const std::string model = test::fixture_dir("nemotron_h");
  std::string out, err;
  EXPECT_EQ(test::run_strata("serve --model " + model +
                                 " --port 0 --page-size 16 --mamba-radix-cache-strategy "
                                 "extra_buffer --mamba-track-interval 100",
                             &out, &err),
            1);
  EXPECT_NE(err.find("--mamba-track-interval 100 is not a multiple of --page-size 16"),
            std::string::npos)
      << err;
  EXPECT_EQ(test::run_strata("serve --model " + model +
                                 " --port 0 --disable-radix-cache --mamba-radix-cache-strategy "
                                 "extra_buffer --mamba-track-interval 0",
                             &out, &err),
            1);
  for (const char* words : {"extra_buffer keeps state checkpoints for the prefix cache",
                            "--mamba-track-interval must be a positive multiple"})
    EXPECT_NE(err.find(words), std::string::npos) << err;
  EXPECT_EQ(test::run_strata(
                "serve --model " + model + " --port 0 --mamba-radix-cache-strategy ring_buffer",
                &out, &err),
            1);
  EXPECT_NE(err.find("--mamba-radix-cache-strategy 'ring_buffer' is unknown: use auto, "
                     "no_buffer, extra_buffer"),
            std::string::npos)
      << err;
}

}  // namespace strata
