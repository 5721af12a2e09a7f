// Soak (heavy: runs only with STRATA_HEAVY_TESTS=1): rounds of concurrent streams over a KV
// cache far too small for them, with a tenth of the clients hanging up mid-stream, for a
// while. Every stream that stays gets its whole answer ([DONE] and every token), every pool is
// empty after each round, and the process's memory is back at its level after the first round.
// Scale: STRATA_SOAK_STREAMS (default 2000 at once), STRATA_SOAK_SECONDS (default 300).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

long rss_kb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace

TEST(Soak, ThousandsOfStreamsWithHangUpsUnderATinyKVCacheLoseNothing) {
  if (!std::getenv("STRATA_HEAVY_TESTS")) GTEST_SKIP() << "heavy: set STRATA_HEAVY_TESTS=1";
  const int streams = env_int("STRATA_SOAK_STREAMS", 2000);
  const int seconds = env_int("STRATA_SOAK_SECONDS", 300);
  ServerOptions server;
  server.http_threads = std::min(4096, streams + 16);
  test::Harness h("llama", test::harness_runner_options(256, 64), SchedulerOptions{}, "", "",
                  server);
  const auto start = Clock::now();
  long baseline_kb = 0, peak_kb = 0;
  int rounds = 0;
  int64_t finished = 0, hung_up = 0, tokens = 0;
  while (rounds == 0 || Clock::now() - start < std::chrono::seconds(seconds)) {
    std::vector<int> got(streams, 0);
    std::vector<char> done(streams, 0), hang(streams, 0);
    std::vector<std::string> why(streams);  // how a lost answer ended
    std::vector<std::thread> clients;
    clients.reserve(streams);
    for (int i = 0; i < streams; ++i) {
      hang[i] = (i + rounds) % 10 == 0;
      clients.emplace_back([&, i] {
        const int n = 4 + (i * 7 + rounds) % 12;
        const json body = {{"model", "llama"},   {"prompt", {i % 500 + 1, 7, (i + rounds) % 13}},
                           {"max_tokens", n},    {"temperature", 0},
                           {"ignore_eos", true}, {"stream", true}};
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = body.dump();
        req.set_header("Content-Type", "application/json");
        std::string buffer;
        int events = 0;
        req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
          buffer.append(data, len);
          for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
            const std::string event = buffer.substr(0, end);
            buffer.erase(0, end + 2);
            if (event == "data: [DONE]") {
              done[i] = 1;
              continue;
            }
            const json e = json::parse(event.substr(6), nullptr, false);
            if (e.is_object() && e.contains("choices"))
              for (const auto& ch : e["choices"])
                got[i] += static_cast<int>(ch["token_ids"].size());
            ++events;
          }
          return !(hang[i] && events >= 2);  // a tenth hang up after two events
        };
        httplib::Client c("127.0.0.1", h.port());
        c.set_read_timeout(600, 0);
        httplib::Response res;
        httplib::Error err;
        c.send(req, res, err);
        if (!hang[i] && got[i] != n) {
          got[i] = -n;  // marks a lost or short answer
          why[i] = fmt::format("httplib error {}, status {}, body '{}'", httplib::to_string(err),
                               res.status, res.body.substr(0, 200));
        }
      });
    }
    for (auto& t : clients) t.join();
    for (int i = 0; i < streams; ++i) {
      if (hang[i]) {
        ++hung_up;
        continue;
      }
      EXPECT_TRUE(done[i]) << "round " << rounds << " client " << i << ": " << why[i];
      EXPECT_GT(got[i], 0) << "round " << rounds << " client " << i << " lost tokens";
      if (done[i] && got[i] > 0) {
        ++finished;
        tokens += got[i];
      }
    }
    h.expect_pools_empty();
    const long now_kb = rss_kb();
    if (rounds == 0) baseline_kb = now_kb;
    peak_kb = std::max(peak_kb, now_kb);
    ++rounds;
  }
  const long end_kb = rss_kb();
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "soak: %d rounds of %d streams in %.0f s: %lld whole answers (%lld tokens), %lld hang-ups, "
      "%.0f retractions; RSS after round 1 %ld kB, peak %ld kB, end %ld kB\n",
      rounds, streams, took, static_cast<long long>(finished), static_cast<long long>(tokens),
      static_cast<long long>(hung_up), h.metric("strata:num_retractions_total"), baseline_kb,
      peak_kb, end_kb);
  // Back to the level after the first round (allocator caches and thread stacks settle there).
  EXPECT_LT(end_kb, baseline_kb + 64 * 1024);
}

}  // namespace strata
