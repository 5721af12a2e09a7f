// Serving with tensor parallelism: `strata serve --tp-size 2` (one process per rank under
// mpirun; process 0 serves HTTP, the other ranks, and with --pp-size the other stages' ranks,
// follow its steps) answers as one process does: a dense and a hybrid fixture (NemotronH, its
// Mamba2 heads split over the ranks) at TP 2 and TP 2 x PP 2, requests one at a time and 64 at
// once, every other one streamed, with the prefix cache on (hits counted) and off; a client
// that hangs up frees the request's memory on every stage; structured output, which the step
// message does not carry, is a 400; a rank that dies or hangs ends the server with an error.
// (A --tp-size the model does not split is refused up front: tp_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

#include "pipeline_test_util.h"
#include "server_harness.h"

namespace strata::test {

namespace {

using namespace std::chrono_literals;

struct ServeCase {
  std::string fixture, grid;
  int stages;
  bool cache;
};

}  // namespace

TEST(TensorParallelServing, ConcurrentStreamedCachedAndAbortedEqualOneProcess) {
  // CI runs two launches (a dense model at TP 2, a hybrid at TP 2 x PP 2: four processes);
  // STRATA_HEAVY_TESTS=1 adds MLA and the other cache settings.
  std::vector<ServeCase> cases = {{"llama", "--tp-size 2", 1, true},
                                  {"nemotron_h", "--tp-size 2 --pp-size 2", 2, false}};
  if (std::getenv("STRATA_HEAVY_TESTS"))
    cases.insert(cases.end(), {{"deepseek_v2_lite", "--tp-size 2", 1, true},
                               {"llama", "--tp-size 2 --pp-size 2", 2, false},
                               {"nemotron_h", "--tp-size 2", 1, true}});
  for (const ServeCase& c : cases) {
    SCOPED_TRACE(c.fixture + " " + c.grid + (c.cache ? " cache" : " no cache"));
    const Reference ref = load_reference(c.fixture);
    const auto prompts = shared_prefix_prompts(ref.input_ids);
    const std::vector<std::vector<int>> expected = one_process_ids(c.fixture, prompts);
    ServeProcess serve(grid_serve_args(c.fixture, c.grid, c.cache));
    const int port = serve.port();
    ASSERT_GT(port, 0) << serve.log();
    expect_served_ids(port, prompts, expected, serve.log());
    const double cached = metric_of(port, "strata:cached_tokens_total");
    if (c.cache) {
      EXPECT_GT(cached, 0);
    } else {
      EXPECT_EQ(cached, 0);
    }

    // A seeded sample: every rank draws the same ids from the same gathered logits.
    json sampled = greedy_request({7, 8, 9, 10}, 8);
    sampled["sampling_params"]["temperature"] = 0.9;
    sampled["sampling_params"]["seed"] = 5;
    sampled["sampling_params"]["top_k"] = 40;
    const json once = post_to(port, "/generate", sampled.dump()).second;
    ASSERT_EQ(once["output_ids"].size(), 8u) << once.dump();
    EXPECT_EQ(post_to(port, "/generate", sampled.dump()).second["output_ids"], once["output_ids"]);

    // A client that hangs up after 3 chunks of a long stream.
    hang_up_after(port, greedy_request(prompts[3], 200, true), 3);
    for (int i = 0; i < 400 && metric_of(port, "strata:num_aborted_requests_total") < 1; ++i)
      std::this_thread::sleep_for(25ms);
    EXPECT_EQ(metric_of(port, "strata:num_aborted_requests_total"), 1);
    // After the abort every rank still steps alike.
    EXPECT_EQ(post_to(port, "/generate", greedy_request(prompts[5], 6).dump()).second["output_ids"],
              json(expected[5]));

    // Every stage (its tensor-parallel rank 0 reports it) holds what stage 0 holds once idle.
    const json info = idle_server_info(port);
    ASSERT_TRUE(info.is_object());
    EXPECT_EQ(info["tp_size"], 2) << info.dump();
    EXPECT_EQ(info["pipeline"]["pp_size"], c.stages) << info.dump();
    for (const json& stage : info["pipeline"]["stages"]) {
      EXPECT_EQ(stage["num_running_reqs"], 0) << info.dump();
      EXPECT_EQ(stage["used_pages"], info["pipeline"]["stages"][0]["used_pages"]) << info.dump();
      if (!c.cache) {
        EXPECT_EQ(stage["used_pages"], 0) << info.dump();
      }
    }

    json regex = greedy_request({4, 5}, 2);
    regex["sampling_params"]["regex"] = "[a-z]+";
    const auto [status, refusal] = post_to(port, "/generate", regex.dump());
    EXPECT_EQ(status, 400) << refusal.dump();
    EXPECT_NE(refusal.dump().find("--tp-size 2"), std::string::npos) << refusal.dump();
    EXPECT_EQ(serve.stop(), 0) << serve.log();
  }
}

// A rank that dies: mpirun ends the job, the launcher says so. A rank that hangs after its
// first pass: process 0's all-reduce waits --pp-timeout, then the job ends with one error line
// naming process 0's place in the grid and the wait.
TEST(TensorParallelServingFailures, ADeadOrHungRankEndsTheServer) {
  for (const std::string fault : {"exit:1", "hang:1"}) {
    SCOPED_TRACE(fault);
    const FaultedServer ended = serve_with_fault(
        "--model " + fixture_dir("llama") + " --tp-size 2 --threads 1 --context-length 256", fault);
    EXPECT_NE(ended.status, 0) << ended.log;
    EXPECT_NE(ended.status, -2) << "still running\n" << ended.log;
    EXPECT_EQ(ended.processes_left, 0) << "rank processes left running";
    if (fault == "hang:1") {
      EXPECT_NE(
          ended.log.find("error: pipeline stage 0/1, tensor-parallel rank 0/2 (layers [0, 4)): "),
          std::string::npos)
          << ended.log;
      EXPECT_NE(ended.log.find("a tensor-parallel all-reduce"), std::string::npos) << ended.log;
    }
    EXPECT_NE(ended.log.find("error: the 2 processes of the job"), std::string::npos) << ended.log;
  }
}

}  // namespace strata::test
