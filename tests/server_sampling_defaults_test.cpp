// Usage counting with several choices, completions' best_of, the model's
// generation_config.json sampling defaults, and the model_name label of /metrics, over HTTP
// on loopback with the tiny Llama.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/generation_defaults.h"
#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

using test::Harness;

std::vector<int> ids_of(const json& choice) {
  return choice["token_ids"].get<std::vector<int>>();
}

std::vector<int> long_prompt() {
  std::vector<int> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(3 + (i * 7) % 90);
  return ids;
}

}  // namespace

TEST(ServerSampling, UsageCountsEachPromptAndItsCachedTokensOnce) {
  Harness h;
  const std::vector<int> prompt = long_prompt();
  const json body = {
      {"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"ignore_eos", true}, {"n", 3}};
  // The second time, every choice finds the prompt cached by the first run.
  for (int round = 0; round < 2; ++round) {
    const auto [s, r] = h.post("/v1/completions", body);
    ASSERT_EQ(s, 200) << r.dump();
    const json& u = r["usage"];
    EXPECT_EQ(u["prompt_tokens"], prompt.size()) << u.dump();
    EXPECT_EQ(u["completion_tokens"], 9) << u.dump();
    EXPECT_EQ(u["total_tokens"], prompt.size() + 9) << u.dump();
    const int cached = u["prompt_tokens_details"]["cached_tokens"].get<int>();
    EXPECT_LE(cached, static_cast<int>(prompt.size())) << u.dump();
    if (round == 1) {
      EXPECT_GT(cached, 0) << u.dump();
    }
  }
  // Two prompts, n = 2: each prompt once.
  const auto [s, r] = h.post("/v1/completions", json{{"prompt", {prompt, {5, 6, 7}}},
                                                     {"max_tokens", 2},
                                                     {"temperature", 0},
                                                     {"ignore_eos", true},
                                                     {"n", 2}});
  ASSERT_EQ(s, 200) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt.size() + 3) << r["usage"].dump();
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);
}

TEST(ServerSampling, BestOfAnswersTheCandidateWithTheHighestMeanLogprob) {
  Harness h;
  const json base = {{"prompt", {3, 4, 5}}, {"max_tokens", 6}, {"temperature", 1.5},
                     {"ignore_eos", true},  {"seed", 77},      {"logprobs", 0}};
  // The four candidates best_of runs are the four choices of n = 4 with the same seed.
  json all = base;
  all["n"] = 4;
  const auto [s1, a] = h.post("/v1/completions", all);
  ASSERT_EQ(s1, 200) << a.dump();
  size_t best = 0;
  double best_mean = -1e30;
  for (size_t k = 0; k < 4; ++k) {
    double sum = 0;
    for (const auto& v : a["choices"][k]["logprobs"]["token_logprobs"]) sum += v.get<double>();
    if (sum / 6 > best_mean) best_mean = sum / 6, best = k;
  }
  json one = base;
  one["best_of"] = 4;
  one.erase("logprobs");
  const auto [s2, b] = h.post("/v1/completions", one);
  ASSERT_EQ(s2, 200) << b.dump();
  ASSERT_EQ(b["choices"].size(), 1u);
  EXPECT_EQ(ids_of(b["choices"][0]), ids_of(a["choices"][best]));
  EXPECT_EQ(b["choices"][0]["index"], 0);
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());  // not asked for
  EXPECT_EQ(b["usage"]["completion_tokens"], 24);      // every candidate ran
  // best_of below n, or streamed, is a 400 naming best_of.
  json low = base;
  low["n"] = 3;
  low["best_of"] = 2;
  const auto [s3, e3] = h.post("/v1/completions", low);
  EXPECT_EQ(s3, 400);
  EXPECT_EQ(e3["error"]["param"], "best_of") << e3.dump();
  one["stream"] = true;
  const auto [s4, e4] = h.post("/v1/completions", one);
  EXPECT_EQ(s4, 400);
  EXPECT_EQ(e4["error"]["param"], "best_of") << e4.dump();
}

TEST(ServerSampling, GenerationConfigSuppliesTheDefaults) {
  const std::filesystem::path dir =
      std::filesystem::path(test::scratch_dir()) / "generation_defaults";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json")
      << R"({"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": "x",
             "repetition_penalty": 1.05, "max_new_tokens": 64, "eos_token_id": 2})";
  const SamplingDefaults d = read_generation_defaults(dir.string());
  EXPECT_FLOAT_EQ(d.temperature, 0.6f);
  EXPECT_FLOAT_EQ(d.top_p, 0.95f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_FLOAT_EQ(d.min_p, 0.0f);  // not a number: skipped
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.05f);
  EXPECT_EQ(d.max_new_tokens, 64);
  EXPECT_FALSE(d.source.contains("min_p"));
  const SamplingDefaults none = read_generation_defaults((dir / "absent").string());
  EXPECT_FLOAT_EQ(none.temperature, 1.0f);
  EXPECT_FALSE(none.max_new_tokens.has_value());

  // Over HTTP: a model whose defaults are greedy and 5 tokens answers a request that sets
  // neither as the explicit greedy request does, on every route.
  ServerOptions so;
  so.sampling_defaults.temperature = 0;
  so.sampling_defaults.max_new_tokens = 5;
  Harness h("llama", test::harness_runner_options(4096, 16), SchedulerOptions{}, "", "llama", so);
  const auto [s1, greedy] = h.post(
      "/v1/completions",
      json{{"prompt", {3, 4, 5}}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(s1, 200) << greedy.dump();
  for (int round = 0; round < 2; ++round) {
    const auto [s2, d2] =
        h.post("/v1/completions", json{{"prompt", {3, 4, 5}}, {"ignore_eos", true}});
    ASSERT_EQ(s2, 200) << d2.dump();
    EXPECT_EQ(ids_of(d2["choices"][0]), ids_of(greedy["choices"][0]));
  }
  const auto [s3, g] = h.post(
      "/generate", json{{"input_ids", {3, 4, 5}}, {"sampling_params", {{"ignore_eos", true}}}});
  ASSERT_EQ(s3, 200) << g.dump();
  EXPECT_EQ(g["output_ids"].get<std::vector<int>>(), ids_of(greedy["choices"][0]));
  // A request's own field wins over the default.
  const auto [s4, hot] = h.post(
      "/v1/completions", json{{"prompt", {3, 4, 5}}, {"max_tokens", 2}, {"ignore_eos", true}});
  ASSERT_EQ(s4, 200);
  EXPECT_EQ(hot["usage"]["completion_tokens"], 2);
}

TEST(ServerSampling, MetricsCarryTheModelName) {
  Harness h("llama", test::harness_runner_options(4096, 16), SchedulerOptions{}, "", "my-model");
  auto res = h.client().Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("strata:num_running_reqs{model_name=\"my-model\"} 0"), std::string::npos)
      << res->body.substr(0, 400);
  EXPECT_NE(res->body.find("strata:time_to_first_token_seconds_bucket{model_name=\"my-model\","
                           "le=\"0.001\"}"),
            std::string::npos);
  EXPECT_NE(res->body.find("strata:time_to_first_token_seconds_count{model_name=\"my-model\"}"),
            std::string::npos);
  EXPECT_EQ(h.metric("strata:num_running_reqs"), 0);
}

}  // namespace strata
