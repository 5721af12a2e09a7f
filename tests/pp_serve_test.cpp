// Serving over a pipeline: `strata serve --pp-size 2 | 3` (stage processes under mpirun,
// process 0 serving HTTP, the others following its steps) answers as one process does: the
// greedy ids of the reference (what --pp-size 1 serves, server_test.cpp) for a dense and a
// hybrid fixture at page sizes 1 and 16, with the requests batched together, streamed, cut
// at stop strings, hitting the prefix cache, and aborted by a client that hangs up; with
// several micro-batches in flight for a dense, an MLA and a hybrid fixture, 64 requests at
// once, the prefix cache on and off, each stage's memory and bubbles reported; a stage
// that hangs or dies ends the server with an error naming it; bad pipeline flags and requests
// for what the pipeline does not carry (structured output) are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <future>
#include <thread>

#include "pipeline_test_util.h"
#include "server_harness.h"

namespace strata::test {

namespace {

using namespace std::chrono_literals;

std::string serve_args(const std::string& fixture, const std::string& pipeline, int page_size) {
  return "--model " + fixture_dir(fixture) + " " + pipeline +
         " --threads 1 --pp-timeout 60 --max-running-requests 8 --context-length 256" +
         " --page-size " + std::to_string(page_size);
}

struct Case {
  std::string fixture;
  int page_size;
  std::vector<std::string> pipelines;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.fixture << "/" << c.page_size; }
};

class PipelineServing : public testing::TestWithParam<Case> {};

}  // namespace

// Every reference prompt at once (continuous batching across the stages), one of them
// streamed, then the longest again: a prefix-cache hit with the same ids.
TEST_P(PipelineServing, ServedIdsEqualOneProcess) {
  const Case c = GetParam();
  const Reference ref = load_reference(c.fixture);
  for (const std::string& pipeline : c.pipelines) {
    SCOPED_TRACE(pipeline);
    ServeProcess serve(serve_args(c.fixture, pipeline, c.page_size));
    const int port = serve.port();
    ASSERT_GT(port, 0) << serve.log();
    std::vector<std::future<json>> answers;
    // The first asks for logprobs too: they come back from the last stage to every stage,
    // the middle one of 3 included.
    for (size_t i = 0; i < ref.input_ids.size(); ++i)
      answers.push_back(std::async(std::launch::async, [&, i] {
        json request = greedy_request(ref.input_ids[i], 10);
        if (i == 0) request["return_logprob"] = true;
        return post_to(port, "/generate", request.dump()).second;
      }));
    bool done = false;
    const auto events =
        stream_from(port, "/generate", greedy_request(ref.input_ids[1], 10, true), &done);
    for (size_t i = 0; i < answers.size(); ++i) {
      const json a = answers[i].get();
      ASSERT_TRUE(a.contains("output_ids")) << a.dump() << serve.log();
      EXPECT_EQ(a["output_ids"].get<std::vector<int>>(), ref.greedy_ids[i]) << "prompt " << i;
      if (i > 0) continue;
      const json& logprobs = a["meta_info"]["output_token_logprobs"];
      ASSERT_EQ(logprobs.size(), ref.greedy_ids[0].size()) << a.dump();
      for (size_t t = 0; t < logprobs.size(); ++t) {
        EXPECT_EQ(logprobs[t][1], ref.greedy_ids[0][t]) << "token " << t;
        EXPECT_LE(logprobs[t][0].get<double>(), 0.0) << "token " << t;
      }
    }
    EXPECT_TRUE(done);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["output_ids"].get<std::vector<int>>(), ref.greedy_ids[1]);
    // The longest prompt and the first 3 tokens it drew: the prompt's KV (and on the hybrid
    // its state snapshot, taken where its prefill ended: a whole page with pages of 16) is
    // cached, and the rest of the ids it drew follow.
    const size_t longest = ref.input_ids.size() - 1;
    std::vector<int> extended = ref.input_ids[longest];
    const std::vector<int>& drawn = ref.greedy_ids[longest];
    extended.insert(extended.end(), drawn.begin(), drawn.begin() + 3);
    const json again = post_to(port, "/generate", greedy_request(extended, 7).dump()).second;
    EXPECT_EQ(again["output_ids"].get<std::vector<int>>(),
              std::vector<int>(drawn.begin() + 3, drawn.end()));
    const int prompt = static_cast<int>(ref.input_ids[longest].size());
    EXPECT_GE(again["meta_info"]["cached_tokens"].get<int>(), prompt / c.page_size * c.page_size);
    EXPECT_EQ(serve.stop(), 0) << serve.log();
  }
}

// NemotronH's 8 layers (M - M * - M * -): at PP 3 the first stage [M -] holds no attention
// layer (token memory without a KV pool); the partition 6,2 leaves the last stage [* -]
// without a Mamba2 layer (a state pool of slots without layers).
const std::vector<std::string> kDense = {"--pp-size 2", "--pp-size 3"};
const std::vector<std::string> kHybrid = {"--pp-size 2", "--pp-size 3", "--pp-layer-partition 6,2"};
INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineServing,
                         testing::Values(Case{"llama", 1, kDense}, Case{"llama", 16, kDense},
                                         Case{"nemotron_h", 1, kHybrid},
                                         Case{"nemotron_h", 16, kHybrid}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return info.param.fixture + "_page" +
                                  std::to_string(info.param.page_size);
                         });

// Stop strings are matched on every stage (each finishes the request at the same token), a
// client that hangs up mid-stream aborts its request everywhere (the server then still
// answers, and holds nothing), sampling controls and logprobs are carried, and structured
// output, which the pipeline does not carry, is a 400.
TEST(PipelineServingText, StopStringsSamplingLogprobsAbortsAndRefusals) {
  const std::string tokenizer = tiny_tokenizer_dir();
  Harness one(SchedulerOptions{}, 4096, 16, "llama", tokenizer);
  ServeProcess serve(serve_args("llama", "--pp-size 2", 1) + " --tokenizer-path " + tokenizer);
  const int port = serve.port();
  ASSERT_GT(port, 0) << serve.log();
  auto text_request = [](const std::string& stop) {
    json r = {{"text", "hello world"},
              {"sampling_params", {{"max_new_tokens", 24}, {"temperature", 0}}}};
    if (!stop.empty()) r["sampling_params"]["stop"] = stop;
    return r.dump();
  };
  const json free_run = one.post("/generate", text_request("")).second;
  const std::string text = free_run["text"].get<std::string>();
  ASSERT_GE(text.size(), 6u) << free_run.dump();
  // A stop string the answer reaches: two ASCII characters after its start (whole
  // characters, so that the request is valid UTF-8).
  std::string stop;
  for (size_t i = 2; stop.empty() && i + 1 < text.size(); ++i)
    if (std::isalnum(static_cast<unsigned char>(text[i])) &&
        std::isalnum(static_cast<unsigned char>(text[i + 1])))
      stop = text.substr(i, 2);
  ASSERT_FALSE(stop.empty()) << text;
  const json expected = one.post("/generate", text_request(stop)).second;
  EXPECT_EQ(expected["meta_info"]["finish_reason"]["type"], "stop") << expected.dump();
  const json staged = post_to(port, "/generate", text_request(stop)).second;
  EXPECT_EQ(staged["text"], expected["text"]) << staged.dump();
  EXPECT_EQ(staged["output_ids"], expected["output_ids"]);
  EXPECT_EQ(staged["meta_info"]["finish_reason"], expected["meta_info"]["finish_reason"]);

  // Every sampling control reaches the last stage, which draws: a seeded sample under
  // penalties, a bias, top-k/top-p, min_tokens and stop ids is the one of one process.
  const json sampled = {{"input_ids", {7, 8, 9, 10}},
                        {"sampling_params",
                         {{"max_new_tokens", 12},
                          {"temperature", 0.9},
                          {"seed", 11},
                          {"top_k", 40},
                          {"top_p", 0.95},
                          {"min_p", 0.01},
                          {"repetition_penalty", 1.3},
                          {"presence_penalty", 0.4},
                          {"frequency_penalty", 0.2},
                          {"min_tokens", 2},
                          {"logit_bias", {{"5", 3.5}, {"6", -100}}},
                          {"stop_token_ids", {500}}}}};
  const json one_sampled = one.post("/generate", sampled).second;
  ASSERT_TRUE(one_sampled.contains("output_ids")) << one_sampled.dump();
  EXPECT_EQ(post_to(port, "/generate", sampled.dump()).second["output_ids"],
            one_sampled["output_ids"]);

  // Logprobs come back from the drawing stage: the chosen token's and the top 3, as one
  // process computes them (the same batch of one request: within float rounding).
  json logprobs = greedy_request({4, 5, 6, 7}, 6);
  logprobs["return_logprob"] = true;
  logprobs["top_logprobs_num"] = 3;
  const json one_lp = one.post("/generate", logprobs).second["meta_info"];
  const json staged_lp = post_to(port, "/generate", logprobs.dump()).second["meta_info"];
  ASSERT_EQ(staged_lp["output_token_logprobs"].size(), 6u) << staged_lp.dump();
  ASSERT_EQ(staged_lp["output_top_logprobs"].size(), 6u) << staged_lp.dump();
  for (size_t t = 0; t < 6; ++t) {
    const json& a = staged_lp["output_token_logprobs"][t];
    const json& b = one_lp["output_token_logprobs"][t];
    EXPECT_EQ(a[1], b[1]) << "token " << t;
    EXPECT_NEAR(a[0].get<double>(), b[0].get<double>(), 1e-4) << "token " << t;
    ASSERT_EQ(staged_lp["output_top_logprobs"][t].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      const json& x = staged_lp["output_top_logprobs"][t][k];
      const json& y = one_lp["output_top_logprobs"][t][k];
      EXPECT_EQ(x[1], y[1]) << "token " << t << " top " << k;
      EXPECT_NEAR(x[0].get<double>(), y[0].get<double>(), 1e-4) << "token " << t << " top " << k;
    }
  }

  // Prompt logprobs (logprob_start_len) come back from the last stage too.
  json prompt_lp = greedy_request({4, 5, 6, 7, 8, 9}, 2);
  prompt_lp["return_logprob"] = true;
  prompt_lp["logprob_start_len"] = 0;
  const json one_in = one.post("/generate", prompt_lp).second["meta_info"];
  const json staged_in = post_to(port, "/generate", prompt_lp.dump()).second["meta_info"];
  ASSERT_EQ(staged_in["input_token_logprobs"].size(), one_in["input_token_logprobs"].size())
      << staged_in.dump();
  for (size_t t = 0; t < one_in["input_token_logprobs"].size(); ++t) {
    const json& a = staged_in["input_token_logprobs"][t];
    const json& b = one_in["input_token_logprobs"][t];
    EXPECT_EQ(a[1], b[1]) << "prompt token " << t;
    if (b[0].is_null())
      EXPECT_TRUE(a[0].is_null()) << "prompt token " << t;
    else
      EXPECT_NEAR(a[0].get<double>(), b[0].get<double>(), 1e-4) << "prompt token " << t;
  }

  hang_up_after(port, greedy_request({4, 5, 6}, 200, true), 3);
  for (int i = 0; i < 400 && metric_of(port, "strata:num_aborted_requests_total") < 1; ++i)
    std::this_thread::sleep_for(25ms);
  EXPECT_EQ(metric_of(port, "strata:num_aborted_requests_total"), 1);
  EXPECT_LT(metric_of(port, "strata:generation_tokens_total"), 200);
  // After the abort every stage still steps alike: the same answer as one process.
  EXPECT_EQ(post_to(port, "/generate", greedy_request({4, 5, 6}, 8).dump()).second["output_ids"],
            one.post("/generate", greedy_request({4, 5, 6}, 8)).second["output_ids"]);
  for (int i = 0; i < 400 && metric_of(port, "strata:num_running_reqs") > 0; ++i)
    std::this_thread::sleep_for(25ms);
  EXPECT_EQ(metric_of(port, "strata:num_running_reqs"), 0);

  auto refused = [&](const json& body, const std::string& words) {
    const auto [status, answer] = post_to(port, "/generate", body.dump());
    EXPECT_EQ(status, 400) << answer.dump();
    EXPECT_NE(answer.dump().find(words), std::string::npos) << answer.dump();
  };
  json regex = greedy_request({4, 5}, 2);
  regex["sampling_params"]["regex"] = "[a-z]+";
  refused(regex, "--pp-size 2");
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

// Every stage makes the same scheduling decisions under memory pressure: with a KV cache of
// 64 tokens for 8 requests of 40 (retractions, re-admissions), chunked prefill mixed with
// decoding and an uneven partition, every answer is the one of one roomy process.
TEST(PipelineServingPressure, RetractionsChunksAndMixedStepsStayInLockstep) {
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 8; ++k) {
    std::vector<int> p;
    for (int i = 0; i < 10 + k; ++i) p.push_back((k * 61 + i * 11) % 512);
    prompts.push_back(p);
  }
  Harness one(SchedulerOptions{}, 4096);
  ServeProcess serve("--model " + fixture_dir("llama") +
                     " --pp-size 2 --pp-layer-partition 1,3 --threads 1 --pp-timeout 60"
                     " --context-length 256 --max-total-tokens 64 --chunked-prefill-size 8"
                     " --enable-mixed-chunk");
  const int port = serve.port();
  ASSERT_GT(port, 0) << serve.log();
  std::vector<std::future<json>> answers;
  for (const auto& prompt : prompts)
    answers.push_back(std::async(std::launch::async, [&, prompt] {
      return post_to(port, "/generate", greedy_request(prompt, 30).dump()).second;
    }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json a = answers[i].get();
    ASSERT_EQ(a["output_ids"].size(), 30u) << a.dump() << serve.log();
    EXPECT_EQ(a["output_ids"],
              one.post("/generate", greedy_request(prompts[i], 30)).second["output_ids"])
        << "prompt " << i;
  }
  EXPECT_GT(metric_of(port, "strata:num_retractions_total"), 0);
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

namespace {

struct MicroBatchCase {
  std::string fixture, pipeline;
  int stages;
  bool cache;
};

}  // namespace

// Several micro-batches in flight (one per stage, the default): a dense, an MLA and a hybrid
// fixture (NemotronH, layer 0 a Mamba2 layer; the partition 1,3,4 gives stage 0 that layer
// alone) at 2 and 3 stages, with the prefix cache on and off, answer what one process answers:
// requests one at a time, then 64 at once, every other one streamed. A client that hangs up
// mid-stream frees the request's memory on every stage (each stage reports its pages to
// process 0), and /get_server_info and /metrics report the stages and their bubbles.
TEST(PipelineServingMicroBatches, ConcurrentStreamedCachedAndAbortedEqualOneProcess) {
  // Each fixture at 2 and 3 stages and with the cache on and off among the six.
  const std::vector<MicroBatchCase> cases = {{"llama", "--pp-size 3", 3, false},
                                             {"llama", "--pp-size 2", 2, true},
                                             {"deepseek_v2_lite", "--pp-size 2", 2, true},
                                             {"deepseek_v2_lite", "--pp-size 3", 3, false},
                                             {"nemotron_h", "--pp-layer-partition 1,3,4", 3, true},
                                             {"nemotron_h", "--pp-size 2", 2, false}};
  for (const MicroBatchCase& c : cases) {
    SCOPED_TRACE(c.fixture + " " + c.pipeline + (c.cache ? " cache" : " no cache"));
    const Reference ref = load_reference(c.fixture);
    const auto prompts = shared_prefix_prompts(ref.input_ids);
    const std::vector<std::vector<int>> expected = one_process_ids(c.fixture, prompts);
    ServeProcess serve(grid_serve_args(c.fixture, c.pipeline, c.cache));
    const int port = serve.port();
    ASSERT_GT(port, 0) << serve.log();
    expect_served_ids(port, prompts, expected, serve.log());
    const double cached = metric_of(port, "strata:cached_tokens_total");
    if (c.cache) {
      EXPECT_GT(cached, 0);
    } else {
      EXPECT_EQ(cached, 0);
    }

    // A client that hangs up after 3 chunks of a long stream.
    hang_up_after(port, greedy_request(prompts[3], 200, true), 3);
    for (int i = 0; i < 400 && metric_of(port, "strata:num_aborted_requests_total") < 1; ++i)
      std::this_thread::sleep_for(25ms);
    EXPECT_EQ(metric_of(port, "strata:num_aborted_requests_total"), 1);

    const json pipeline = idle_server_info(port)["pipeline"];
    EXPECT_EQ(pipeline["pp_size"], c.stages) << pipeline.dump();
    EXPECT_EQ(pipeline["micro_batches"], c.stages) << pipeline.dump();
    ASSERT_EQ(pipeline["stages"].size(), static_cast<size_t>(c.stages)) << pipeline.dump();
    for (const json& stage : pipeline["stages"]) {
      // Every stage holds what stage 0 holds: nothing but the prefix cache's pages and states.
      EXPECT_EQ(stage["num_running_reqs"], 0) << pipeline.dump();
      EXPECT_EQ(stage["used_pages"], pipeline["stages"][0]["used_pages"]) << pipeline.dump();
      EXPECT_EQ(stage["used_state_slots"], pipeline["stages"][0]["used_state_slots"])
          << pipeline.dump();
      if (!c.cache) {
        EXPECT_EQ(stage["used_pages"], 0) << pipeline.dump();
      }
      EXPECT_GE(stage["wait_s"].get<double>(), 0.0);
    }
    // The last stage waits for its input in every pass: it has bubbles to show.
    EXPECT_GT(pipeline["stages"][c.stages - 1]["wait_s"].get<double>(), 0.0) << pipeline.dump();
    EXPECT_EQ(metric_of(port, "strata:pp_size"), c.stages);
    EXPECT_GE(metric_of(port, "strata:pipeline_stage_wait_seconds_total"), 0.0);
    EXPECT_EQ(serve.stop(), 0) << serve.log();
  }
}

// Idle for longer than --pp-timeout, the server lives on (heartbeats). A stage that hangs
// after its first pass: process 0 waits --pp-timeout for its ids, then the job ends with one
// error naming the waiting stage and the hung process. A stage that dies: mpirun ends the
// job naming the process, and the launcher says so.
TEST(PipelineServingFailures, AHungOrDeadStageEndsTheServer) {
  for (const std::string fault : {"hang:1", "exit:1"}) {
    SCOPED_TRACE(fault);
    const FaultedServer ended = serve_with_fault(
        "--model " + fixture_dir("llama") + " --pp-size 2 --threads 1 --context-length 256", fault,
        fault == "hang:1" ? 5 : 0);
    EXPECT_NE(ended.status, 0) << ended.log;
    EXPECT_NE(ended.status, -2) << "still running\n" << ended.log;
    EXPECT_EQ(ended.processes_left, 0) << "stage processes left running";
    if (fault == "hang:1") {
      EXPECT_NE(ended.log.find("error: pipeline stage 0/2 (layers [0, 2)): process 0 waited 3 s "
                               "for process 1"),
                std::string::npos)
          << ended.log;
    }
    if (fault == "exit:1") {
      EXPECT_NE(ended.log.find("Process name: [["), std::string::npos) << ended.log;
    }
    EXPECT_NE(ended.log.find("error: the 2 processes of the job (pipeline stages x "
                             "tensor-parallel ranks) did not all finish"),
              std::string::npos)
        << ended.log;
  }
}

}  // namespace strata::test
