// The HTTP server against clients that misbehave or arrive at a bad time: a POST without
// Content-Length is an empty body answered at once; slow clients that trickle their headers
// cannot take every thread from /health; a full queue and a shutdown refuse with 503 and
// Retry-After, which clients retry on; a stream that must wait for memory gets its headers
// at once; the listen backlog holds a burst of as many connections as there are threads.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "server/engine.h"
#include "server/request_parsing.h"
#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a fresh connection and reads the answer until the server closes it or
// `limit` passes.
std::string exchange(int port, const std::string& request, std::chrono::milliseconds limit) {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  timeval tv{0, 200 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  const auto start = Clock::now();
  char buf[4096];
  while (Clock::now() - start < limit) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n > 0) {
      answer.append(buf, static_cast<size_t>(n));
      if (answer.find("\r\n\r\n") != std::string::npos &&
          answer.find("Content-Length: ") != std::string::npos) {
        const size_t at = answer.find("Content-Length: ") + 16;
        const size_t body = answer.find("\r\n\r\n") + 4;
        if (answer.size() >= body + std::stoul(answer.substr(at))) break;
      }
    }
  }
  close(fd);
  return answer;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

json long_generate(int max_new_tokens) {
  return {{"input_ids", {3, 17, 42}},
          {"sampling_params",
           {{"max_new_tokens", max_new_tokens}, {"temperature", 0}, {"ignore_eos", true}}}};
}

}  // namespace

TEST(ServerHardening, PostWithoutContentLengthIsAnEmptyBodyAnsweredAtOnce) {
  test::Harness h;
  const auto start = Clock::now();
  // No Content-Length, no Transfer-Encoding, and the connection stays open: HTTP/1.1 says the
  // body is empty, so the answer (a 400 for the missing JSON) must not wait for more bytes.
  const std::string answer =
      exchange(h.port(), "POST /generate HTTP/1.1\r\nHost: x\r\n\r\n", std::chrono::seconds(10));
  const double took = seconds_since(start);
  EXPECT_NE(answer.find("HTTP/1.1 400"), std::string::npos) << answer;
  EXPECT_LT(took, 1.0) << answer;
  // A body with its length still arrives whole.
  auto res = h.client().Post("/generate", long_generate(3).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

TEST(ServerHardening, ClientsTricklingHeadersCannotStarveHealth) {
  ServerOptions server;
  server.http_threads = 8;
  test::Harness h("llama", test::harness_runner_options(4096, 4), SchedulerOptions{}, "", "",
                  server);
  // Three times as many slow clients as threads, each with half a request line sent and a byte
  // more every 500 ms: each read succeeds, so only a deadline on the whole request frees them.
  constexpr int kSlow = 24;
  std::atomic<bool> stop{false};
  std::vector<std::thread> slow;
  for (int i = 0; i < kSlow; ++i)
    slow.emplace_back([&] {
      const int fd = connect_to(h.port());
      if (fd < 0) return;
      const std::string line = "GET /health HTTP/1.1\r\nX-Slow: ";
      send(fd, line.data(), line.size(), MSG_NOSIGNAL);
      while (!stop && send(fd, "a", 1, MSG_NOSIGNAL) == 1) std::this_thread::sleep_for(500ms);
      close(fd);
    });
  std::this_thread::sleep_for(300ms);  // every thread is now held by a slow client
  const auto start = Clock::now();
  const std::string answer =
      exchange(h.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
               std::chrono::seconds(20));
  const double took = seconds_since(start);
  stop = true;
  for (auto& t : slow) t.join();
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  // Under pressure a request read may take 1 s; slow clients give way within a few of those.
  EXPECT_LT(took, 5.0);
  std::printf("/health with %d slow clients on %d threads: %.2f s\n", kSlow, server.http_threads,
              took);
}

// In the engine, deterministically: beyond max_in_flight a submit is refused with 503; at
// shutdown a request that has produced nothing ends as a retryable error (a 503), and a
// submit after it is refused with 503.
TEST(ServerHardening, TheEngineRefusesWith503WhenFullAndAtShutdown) {
  ModelRunner runner(ModelConfig::load(test::fixture_dir("llama")), test::default_options(1, 1));
  Scheduler scheduler(runner, SchedulerOptions{});
  ServerMetrics metrics;
  ServeRequest r;
  r.input_ids = {3, 17, 42};
  r.sampling.stop_at_eos = false;
  r.sampling.max_new_tokens = 200;
  {
    Engine idle(scheduler, metrics, 2);  // not started: what is submitted stays queued
    idle.submit(r);
    idle.submit(r);
    try {
      idle.submit(r);
      ADD_FAILURE() << "a third request was accepted";
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status, 503);
      EXPECT_NE(std::string(e.what()).find("--max-queued-requests"), std::string::npos);
    }
  }
  Scheduler fresh(runner, SchedulerOptions{});
  Engine engine(fresh, metrics);
  engine.start();
  r.sampling.max_new_tokens = 250;  // of the context's 256
  auto running = engine.submit(r);  // one running request at most: the next one waits
  r.sampling.max_new_tokens = 5;
  auto queued = engine.submit(r);
  engine.shutdown();
  RequestOutput o;
  bool finished = false;
  while (!finished && queued->next(o, 5000ms)) finished = o.finished;
  ASSERT_TRUE(finished);
  EXPECT_TRUE(o.token_ids.empty());
  EXPECT_EQ(o.finish_reason, "error");
  EXPECT_TRUE(o.error_retryable) << o.error;
  EXPECT_NE(o.error.find("shutting down"), std::string::npos) << o.error;
  try {
    engine.submit(r);
    ADD_FAILURE() << "a request was accepted after shutdown";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status, 503);
  }
}

// Over HTTP: requests beyond --max-running-requests + --max-queued-requests get a 503 with
// Retry-After and a body naming the flag; the others their whole answers.
TEST(ServerHardening, AFullServerAnswers503WithRetryAfter) {
  test::ServeProcess serve("--model " + test::fixture_dir("llama") +
                           " --threads 1 --max-running-requests 1 --max-queued-requests 1");
  const int port = serve.port();
  ASSERT_GT(port, 0) << serve.log();
  // Six at once, each 500 tokens: two fit in, the rest arrive while those still run.
  constexpr int kClients = 6;
  std::vector<int> statuses(kClients, 0);
  std::vector<std::string> retry_after(kClients), bodies(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(120, 0);
      auto res = c.Post("/generate", long_generate(500).dump(), "application/json");
      if (!res) return;
      statuses[i] = res->status;
      retry_after[i] = res->get_header_value("Retry-After");
      bodies[i] = res->body;
    });
  for (auto& t : clients) t.join();
  int ok = 0, refused = 0;
  for (int i = 0; i < kClients; ++i) {
    if (statuses[i] == 200) {
      ++ok;
      EXPECT_EQ(json::parse(bodies[i])["output_ids"].size(), 500u);
    } else {
      EXPECT_EQ(statuses[i], 503) << bodies[i];
      EXPECT_EQ(retry_after[i], "1");
      EXPECT_NE(bodies[i].find("--max-queued-requests"), std::string::npos) << bodies[i];
      ++refused;
    }
  }
  EXPECT_GE(ok, 2);
  EXPECT_GE(refused, 1);
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

TEST(ServerHardening, AQueuedStreamGetsItsHeadersAtOnceAndThenWaits) {
  // 256 KV slots, prompts of 200 tokens + 40 new: one request at a time fits. Three run one
  // after the other, and a stream sent after them waits for memory until the last has ended.
  // (Few decoded tokens: under ASan on two busy cores CI decoded 5 tokens/s, and the test must
  // finish well inside its limit; what it checks is when the headers come, not how fast.)
  test::Harness h("llama", test::harness_runner_options(256, 4), SchedulerOptions{});
  auto request = [](int first, int prompt_len, int new_tokens, bool stream) {
    std::vector<int> ids;
    for (int i = 0; i < prompt_len; ++i) ids.push_back((first + i * 7) % 500 + 1);
    json body = {{"input_ids", ids},
                 {"sampling_params",
                  {{"max_new_tokens", new_tokens}, {"temperature", 0}, {"ignore_eos", true}}},
                 {"stream", stream}};
    return body.dump();
  };
  constexpr int kBlockers = 3;
  std::atomic<int> blockers_done{0};
  std::vector<std::thread> blockers;
  for (int i = 0; i < kBlockers; ++i)
    blockers.emplace_back([&, i] {
      auto res = h.client().Post("/generate", request(i * 101, 200, 40, false), "application/json");
      EXPECT_TRUE(res && res->status == 200);
      ++blockers_done;
    });
  const auto wait_start = Clock::now();
  while (h.metric("strata:num_queue_reqs") < kBlockers - 1 && seconds_since(wait_start) < 10)
    std::this_thread::sleep_for(1ms);
  const std::string payload = request(7, 150, 20, true);
  const int fd = connect_to(h.port());
  ASSERT_GE(fd, 0);
  const auto sent = Clock::now();
  const std::string http =
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(payload.size()) + "\r\n\r\n" + payload;
  send(fd, http.data(), http.size(), MSG_NOSIGNAL);
  timeval tv{0, 50 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string answer;
  double headers_at = -1, first_event_at = -1;
  int blockers_done_at_headers = -1;
  double queued_at_headers = -1;
  char buf[4096];
  while (seconds_since(sent) < 240 && answer.find("data: [DONE]") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) continue;
    answer.append(buf, static_cast<size_t>(n));
    const size_t end = answer.find("\r\n\r\n");
    if (headers_at < 0 && end != std::string::npos) {
      headers_at = seconds_since(sent);
      blockers_done_at_headers = blockers_done;
      queued_at_headers = h.metric("strata:num_queue_reqs");
    }
    if (first_event_at < 0 && end != std::string::npos &&
        answer.find("data: {", end) != std::string::npos)
      first_event_at = seconds_since(sent);
  }
  close(fd);
  for (auto& t : blockers) t.join();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("Content-Type: text/event-stream"), std::string::npos);
  // The status line and headers came at once, while the stream still waited in the queue (it
  // fits beside none of the three, and comes after them all); its tokens came later, to [DONE].
  EXPECT_GE(headers_at, 0);
  EXPECT_LT(headers_at, 0.5);
  EXPECT_LT(blockers_done_at_headers, kBlockers);
  EXPECT_GE(queued_at_headers, 1);
  EXPECT_GT(first_event_at, headers_at);
  EXPECT_NE(answer.find("data: [DONE]"), std::string::npos);
  std::printf(
      "queued stream: headers after %.3f s, first token after %.3f s (%d of %d requests "
      "ahead of it done at its headers)\n",
      headers_at, first_event_at, blockers_done_at_headers, kBlockers);
}

TEST(ServerHardening, TheListenBacklogHoldsABurstOfAsManyConnectionsAsThreads) {
  ServerOptions server;
  server.http_threads = 2000;
  test::Harness h("llama", test::harness_runner_options(256, 4), SchedulerOptions{}, "", "",
                  server);
  // The listening socket of the harness's port, and the backlog the kernel gives it (Linux
  // reports a listener's backlog as tcpi_sacked, as `ss -lt` shows it under Send-Q).
  long backlog = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(entry.path().filename().c_str());
    int listening = 0;
    socklen_t len = sizeof(listening);
    sockaddr_in addr{};
    socklen_t addr_len = sizeof(addr);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 ||
        addr.sin_family != AF_INET || ntohs(addr.sin_port) != h.port())
      continue;
    tcp_info info{};
    socklen_t info_len = sizeof(info);
    ASSERT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_len), 0);
    backlog = info.tcpi_sacked;
  }
  long somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  ASSERT_GT(somaxconn, 0);
  EXPECT_EQ(backlog, std::min(2000L, somaxconn));
}

}  // namespace strata

namespace strata {

// A stop that comes before serve() reaches httplib's accept loop is not lost (httplib's own
// stop() acts only on a running loop): serve() then returns at once, and the shutdown of a
// server whose serving thread started late cannot hang.
TEST(ServerHardening, AStopBeforeServeStartsIsNotLost) {
  const ModelConfig config = ModelConfig::load(test::fixture_dir("llama"));
  ModelRunner runner(config, test::harness_runner_options(256, 2));
  Scheduler scheduler(runner, SchedulerOptions{});
  ServerMetrics metrics;
  Engine engine(scheduler, metrics);
  ServerOptions so;
  so.port = 0;
  so.served_model_name = "llama";
  HttpServer http(ServerContext{engine, metrics, nullptr, so});
  http.bind();
  engine.start();
  http.stop();
  auto served = std::async(std::launch::async, [&] { http.serve(); });
  const bool returned = served.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "serve() ran on after stop()";
  if (!returned) http.stop();  // now that it runs, so that the test ends
  served.wait();
  engine.shutdown();
}

}  // namespace strata
