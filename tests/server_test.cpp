// End-to-end tests of the HTTP server on 127.0.0.1 (a free port) with the tiny Llama
// fixture: greedy outputs equal the reference (= `strata generate`), streams concatenate to
// the non-streamed answer, the prefix cache hits without changing outputs, retraction under
// a tiny KV cache loses nothing, bad requests get 4xx bodies, a client that hangs up
// mid-stream frees everything, and many concurrent streams all finish.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

using namespace std::chrono_literals;

using test::Harness;

json greedy_generate(const std::vector<int>& ids, int n, bool stream = false) {
  return {{"input_ids", ids},
          {"stream", stream},
          {"sampling_params", {{"max_new_tokens", n}, {"temperature", 0}, {"ignore_eos", true}}}};
}

json greedy_completion(const std::vector<int>& ids, int n, bool stream = false) {
  return {{"model", "llama"}, {"prompt", ids},      {"max_tokens", n},
          {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

}  // namespace

TEST(Server, GreedyOutputsEqualTheReferenceOnEveryRoute) {
  const auto ref = test::load_reference("llama");
  Harness h;
  ASSERT_EQ(h.client().Get("/health")->status, 200);
  ASSERT_EQ(h.client().Get("/health_generate")->status, 200);
  for (size_t i = 0; i < ref.input_ids.size(); ++i) {
    auto [status, body] = h.post("/generate", greedy_generate(ref.input_ids[i], 10));
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body["output_ids"].get<std::vector<int>>(), ref.greedy_ids[i]) << "prompt " << i;
    EXPECT_EQ(body["meta_info"]["finish_reason"]["type"], "length");
    auto [s2, c] = h.post("/v1/completions", greedy_completion(ref.input_ids[i], 10));
    ASSERT_EQ(s2, 200) << c.dump();
    EXPECT_EQ(c["choices"][0]["token_ids"].get<std::vector<int>>(), ref.greedy_ids[i]);
    EXPECT_EQ(c["usage"]["completion_tokens"], 10);
    EXPECT_EQ(c["usage"]["prompt_tokens"], ref.input_ids[i].size());
  }
  auto models = h.client().Get("/v1/models");
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "llama");
}

TEST(Server, HybridAndMlaModelsServeTheReference) {
  for (const char* fixture : {"nemotron_h", "deepseek_v2_lite"}) {
    const auto ref = test::load_reference(fixture);
    Harness h(SchedulerOptions{}, 4096, 16, fixture);
    std::vector<json> out(ref.input_ids.size());
    std::vector<std::thread> clients;  // concurrent: batched by the scheduler
    for (size_t i = 0; i < ref.input_ids.size(); ++i)
      clients.emplace_back(
          [&, i] { out[i] = h.post("/generate", greedy_generate(ref.input_ids[i], 10)).second; });
    for (auto& t : clients) t.join();
    for (size_t i = 0; i < ref.input_ids.size(); ++i)
      EXPECT_EQ(out[i]["output_ids"].get<std::vector<int>>(), ref.greedy_ids[i])
          << fixture << " prompt " << i;
    h.expect_pools_empty();
  }
}

TEST(Server, AStreamConcatenatedEqualsTheAnswer) {
  Harness h;
  const std::vector<int> prompt{5, 9, 77, 300, 41, 8, 19};
  json body = greedy_completion(prompt, 12);
  body["n"] = 2;
  body["logprobs"] = 2;
  auto [status, whole] = h.post("/v1/completions", body);
  ASSERT_EQ(status, 200) << whole.dump();
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  bool done = false;
  const auto events = h.stream("/v1/completions", body, &done);
  EXPECT_TRUE(done);
  std::vector<int> ids[2];
  std::vector<float> logprobs[2];
  std::string finish[2];
  json usage;
  for (const auto& e : events) {
    if (e.contains("usage") && !e["usage"].is_null()) usage = e["usage"];
    for (const auto& ch : e["choices"]) {
      const int k = ch["index"];
      for (int id : ch["token_ids"]) ids[k].push_back(id);
      for (float lp : ch["logprobs"]["token_logprobs"]) logprobs[k].push_back(lp);
      if (!ch["finish_reason"].is_null()) finish[k] = ch["finish_reason"];
    }
  }
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(ids[k], whole["choices"][k]["token_ids"].get<std::vector<int>>());
    // The second run reuses the first's cached prefix: same tokens, logprobs equal to rounding.
    const auto expected =
        whole["choices"][k]["logprobs"]["token_logprobs"].get<std::vector<float>>();
    ASSERT_EQ(logprobs[k].size(), expected.size());
    for (size_t t = 0; t < expected.size(); ++t) EXPECT_NEAR(logprobs[k][t], expected[t], 1e-4);
    EXPECT_EQ(finish[k], whole["choices"][k]["finish_reason"]);
  }
  EXPECT_EQ(usage["completion_tokens"], 24);
  EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]);

  // Native /generate streams cumulative outputs; the last equals the whole answer.
  auto [s2, native] = h.post("/generate", greedy_generate(prompt, 12));
  const auto native_events = h.stream("/generate", greedy_generate(prompt, 12, true), &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(native_events.empty());
  EXPECT_EQ(native_events.back()["output_ids"], native["output_ids"]);
  EXPECT_EQ(native["output_ids"],
            whole["choices"][0]["token_ids"]);  // temperature 0: n copies agree
}

TEST(Server, ASharedPrefixHitsTheCacheAndChangesNothing) {
  std::vector<int> prefix;
  for (int i = 0; i < 48; ++i) prefix.push_back((i * 29 + 3) % 512);
  auto a = prefix, b = prefix;
  a.insert(a.end(), {7, 8, 9});
  b.insert(b.end(), {100, 200});
  json outputs[2];
  for (bool disable : {false, true}) {
    SchedulerOptions o;
    o.disable_radix_cache = disable;
    Harness h(o);
    ASSERT_EQ(h.post("/generate", greedy_generate(a, 6)).first, 200);
    auto [status, body] = h.post("/generate", greedy_generate(b, 8));
    ASSERT_EQ(status, 200);
    outputs[disable] = body["output_ids"];
    const double hit_tokens = h.metric("strata:cached_tokens_total");
    if (disable) {
      EXPECT_EQ(hit_tokens, 0);
      EXPECT_EQ(body["meta_info"]["cached_tokens"], 0);
    } else {
      EXPECT_EQ(hit_tokens, 48);
      EXPECT_EQ(body["meta_info"]["cached_tokens"], 48);
      EXPECT_GT(h.metric("strata:cache_hit_rate"), 0.4);
    }
    h.expect_pools_empty();
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST(Server, RetractionUnderATinyKVCacheLosesNoRequest) {
  std::vector<std::vector<int>> prompts;
  for (int k = 0; k < 8; ++k) {
    std::vector<int> p;
    for (int i = 0; i < 10 + k; ++i) p.push_back((k * 61 + i * 11) % 512);
    prompts.push_back(p);
  }
  std::vector<json> results[2];
  for (int64_t total : {4096, 64}) {
    Harness h(SchedulerOptions{}, total);
    std::vector<json> out(prompts.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i)
      clients.emplace_back(
          [&, i] { out[i] = h.post("/generate", greedy_generate(prompts[i], 30)).second; });
    for (auto& t : clients) t.join();
    if (total == 64) {
      EXPECT_GT(h.metric("strata:num_retractions_total"), 0);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(out[i]["output_ids"].size(), 30u) << out[i].dump();
      EXPECT_EQ(out[i]["meta_info"]["finish_reason"]["type"], "length");
    }
    results[total == 64] = out;
    h.expect_pools_empty();
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(results[0][i]["output_ids"], results[1][i]["output_ids"]) << "request " << i;
}

TEST(Server, BadRequestsGetClearFourHundreds) {
  Harness h;
  auto expect_error = [&](const std::string& path, const std::string& body, int status,
                          const std::string& words) {
    auto [s, e] = h.post(path, body);
    EXPECT_EQ(s, status) << body.substr(0, 200) << " -> " << e.dump();
    ASSERT_TRUE(e.is_object() && e.contains("error")) << e.dump();
    const std::string message = e["error"]["message"];
    EXPECT_NE(message.find(words), std::string::npos) << message;
    EXPECT_EQ(e["error"]["code"], status);
  };
  const std::vector<int> ok_prompt{1, 2, 3};
  expect_error("/v1/completions", "{\"prompt\": [1, 2", 400, "not valid JSON");
  expect_error("/v1/completions", R"({"prompt": [1, 2], "max_tokens": "ten"})", 400,
               "'max_tokens' must be an integer");
  expect_error("/v1/completions", R"({"prompt": [1, 2], "max_tokens": 0})", 400, "at least 1");
  expect_error("/v1/completions", R"({"prompt": [1, 2], "max_tokens": -3})", 400, "at least 1");
  expect_error("/v1/completions", R"({"model": "gpt-9", "prompt": [1, 2]})", 404,
               "'gpt-9' does not exist");
  expect_error("/v1/completions", R"({"prompt": [1, 2], "temperature": -1})", 400, "temperature");
  expect_error("/v1/completions", R"({"prompt": [1, 2], "user": 5})", 400,
               "'user' must be a string");
  expect_error("/v1/completions", R"({"prompt": [1, 999999]})", 400, "outside the vocabulary");
  expect_error("/v1/completions", R"({"prompt": "hello"})", 400, "no tokenizer");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", 400,
               "no tokenizer");
  expect_error("/generate", "{\"text\": \"caf\xC3\"}", 400, "not valid UTF-8");
  expect_error("/generate",
               R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 1, "min_p": "x"}})", 400,
               "'min_p' must be a number");
  std::vector<int> long_prompt(300, 5);  // the harness's context is 256
  expect_error("/v1/completions", greedy_completion(long_prompt, 4).dump(), 400,
               "exceed the context length");
  expect_error("/v1/completions", std::string(10u << 20, ' ') + "{}", 413, "10 MB");
  expect_error("/nope", "{}", 404, "no route");
  // The server is unharmed.
  EXPECT_EQ(h.client().Get("/health")->status, 200);
  EXPECT_EQ(h.post("/v1/completions", greedy_completion(ok_prompt, 3)).first, 200);
  h.expect_pools_empty();
}

TEST(Server, AClientThatHangsUpMidStreamFreesEverything) {
  Harness h;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = greedy_completion({4, 5, 6}, 200, true).dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;
  };  // then hang up
  httplib::Response res;
  httplib::Error err;
  h.client().send(req, res, err);
  EXPECT_EQ(chunks, 3);
  for (int i = 0; i < 200 && h.metric("strata:num_aborted_requests_total") < 1; ++i)
    std::this_thread::sleep_for(25ms);
  EXPECT_EQ(h.metric("strata:num_aborted_requests_total"), 1);
  EXPECT_LT(h.metric("strata:generation_tokens_total"), 200);
  h.expect_pools_empty();
}

// A non-streamed request writes nothing until it ends, so the server watches the connection
// itself: a client that closes it mid-request aborts the request, which frees all it held.
TEST(Server, AClientThatHangsUpOnAWholeAnswerFreesEverything) {
  constexpr int kChoices = 32, kTokens = 250;  // long enough to be seen running (> 1 s here)
  Harness h(SchedulerOptions{}, kChoices * 256, kChoices);
  json body = greedy_completion({4, 5, 6}, kTokens);
  body["n"] = kChoices;
  const std::string text = body.dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(text.size()) + "\r\n\r\n" + text;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(h.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  for (int i = 0; i < 2000 && h.metric("strata:num_running_reqs") == 0; ++i)
    std::this_thread::sleep_for(5ms);
  ASSERT_GT(h.metric("strata:num_running_reqs"), 0);
  close(fd);  // hang up before any answer
  for (int i = 0; i < 400 && h.metric("strata:num_aborted_requests_total") < kChoices; ++i)
    std::this_thread::sleep_for(25ms);
  EXPECT_EQ(h.metric("strata:num_aborted_requests_total"), kChoices);
  EXPECT_LT(h.metric("strata:generation_tokens_total"), kChoices * kTokens);
  h.expect_pools_empty();
  // The server is unharmed.
  EXPECT_EQ(h.post("/v1/completions", greedy_completion({4, 5, 6}, 3)).first, 200);
}

TEST(Server, ManyConcurrentStreamsAllFinishWhole) {
  SchedulerOptions o;
  Harness h(o, 4096, 64);
  constexpr int kClients = 256;
  std::vector<std::vector<int>> got(kClients);
  // One byte per client: std::vector<bool> packs clients into shared words, and threads that
  // set theirs at the same moment lose each other's writes (a data race this test once
  // failed on: a client that had received [DONE] read as not done).
  std::vector<char> done(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      bool d = false;
      for (const auto& e :
           h.stream("/v1/completions", greedy_completion({i % 500 + 1, 7, i % 13}, 6, true), &d))
        for (const auto& ch : e["choices"])
          for (int id : ch["token_ids"]) got[i].push_back(id);
      done[i] = d;
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(done[i]) << "client " << i;
    EXPECT_EQ(got[i].size(), 6u) << "client " << i;
  }
  EXPECT_EQ(h.metric("strata:num_requests_total"), kClients);
  EXPECT_EQ(h.metric("strata:generation_tokens_total"), kClients * 6);
  h.expect_pools_empty();
}

// The real binary: `strata serve` answers like `strata generate`, and SIGTERM ends it cleanly.
TEST(Server, ServeCommandMatchesGenerateAndStopsOnSigterm) {
  const std::string model = test::fixture_dir("llama");
  std::string out, err;
  ASSERT_EQ(test::run_strata(
                "generate --model " + model + " --input-ids 3,17,42,8 --max-new-tokens 8 --json",
                &out, &err),
            0)
      << err;
  const auto expected = json::parse(out)["output_ids"];

  test::ServeProcess serve("--model " + model + " --threads 2 --context-length 256");
  const int port = serve.port();
  ASSERT_GT(port, 0) << serve.log();
  httplib::Client c = serve.client();
  auto res =
      c.Post("/v1/completions", greedy_completion({3, 17, 42, 8}, 8).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["choices"][0]["token_ids"], expected);
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

}  // namespace strata

namespace strata {

TEST(Server, ServeValidatesTheWholeConfigurationFirst) {
  const std::string model = test::fixture_dir("llama");
  std::string out, err;
  EXPECT_EQ(test::run_strata(
                "serve --model " + model + " --port 70000 --chunked-prefill-size 0 --page-size 0",
                &out, &err),
            1);
  for (const char* words :
       {"--port must be in 0..65535", "--chunked-prefill-size must be positive", "--page-size"})
    EXPECT_NE(err.find(words), std::string::npos) << err;
  // A taken port is reported before any weight loads.
  httplib::Server holder;
  const int port = holder.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  EXPECT_EQ(
      test::run_strata("serve --model " + model + " --port " + std::to_string(port), &out, &err),
      1);
  EXPECT_NE(err.find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << err;
}

}  // namespace strata
