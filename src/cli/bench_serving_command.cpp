// strata bench-serving: a load generator against a running `strata serve`, after SGLang's
// bench_serving. Sends streamed /generate requests with random token-id prompts (or, with
// --dataset-name generated-shared-prefix, groups of prompts that share a long system
// prompt), at a Poisson request rate or as fast as --max-concurrency allows, and reports
// throughput and the percentiles of time to first token, inter-token latency and latency.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchServingFlags {
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string dataset_name = "random";
  int num_prompts = 64;
  int random_input_len = 128, random_output_len = 32;
  double random_range_ratio = 1.0;
  int gsp_num_groups = 4, gsp_prompts_per_group = 8, gsp_system_prompt_len = 256,
      gsp_question_len = 16, gsp_output_len = 16;
  double request_rate = 0;  // requests per second; 0 = all at once
  int max_concurrency = 0;  // 0 = unlimited
  uint64_t seed = 1;
  int vocab_size = 0;  // 0: ask the server
  // Merged into every request's body (RFC 7386 merge patch), e.g. sampling controls:
  // '{"sampling_params": {"temperature": 0.8, "frequency_penalty": 0.5}}'.
  std::string extra_request_body;
  nlohmann::json extra;
  bool json = false;
};

struct Prompt {
  std::vector<int> ids;
  int output_len;
};

struct Result {
  bool ok = false;
  std::string error;
  int input_len = 0, output_len = 0;
  double ttft = 0, latency = 0;
  std::vector<double> itl;
};

std::vector<Prompt> make_prompts(const BenchServingFlags& f, int vocab) {
  std::mt19937_64 rng(f.seed);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  auto random_ids = [&](int n) {
    std::vector<int> v(n);
    for (int& x : v) x = token(rng);
    return v;
  };
  std::vector<Prompt> prompts;
  if (f.dataset_name == "random") {
    auto len = [&](int full) {
      const int lo = std::max(1, static_cast<int>(full * f.random_range_ratio));
      return std::uniform_int_distribution<int>(lo, std::max(lo, full))(rng);
    };
    for (int i = 0; i < f.num_prompts; ++i)
      prompts.push_back({random_ids(len(f.random_input_len)), len(f.random_output_len)});
  } else {
    for (int g = 0; g < f.gsp_num_groups; ++g) {
      const auto system = random_ids(f.gsp_system_prompt_len);
      for (int q = 0; q < f.gsp_prompts_per_group; ++q) {
        auto ids = system;
        const auto question = random_ids(f.gsp_question_len);
        ids.insert(ids.end(), question.begin(), question.end());
        prompts.push_back({ids, f.gsp_output_len});
      }
    }
    std::shuffle(prompts.begin(), prompts.end(), rng);
  }
  return prompts;
}

Result send_one(const BenchServingFlags& f, const Prompt& p) {
  Result r;
  r.input_len = static_cast<int>(p.ids.size());
  httplib::Client client(f.host, f.port);
  client.set_read_timeout(600, 0);
  nlohmann::json body = {
      {"input_ids", p.ids},
      {"stream", true},
      {"sampling_params",
       {{"max_new_tokens", p.output_len}, {"temperature", 0}, {"ignore_eos", true}}}};
  if (!f.extra.is_null()) body.merge_patch(f.extra);
  httplib::Request req;
  req.method = "POST";
  req.path = "/generate";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string buffer;
  const auto start = Clock::now();
  auto last = start;
  size_t seen = 0;
  bool done = false;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      const auto j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded() || !j.contains("output_ids")) continue;
      const size_t total = j["output_ids"].size();
      if (total > seen) {
        const auto now = Clock::now();
        if (seen == 0)
          r.ttft = std::chrono::duration<double>(now - start).count();
        else
          r.itl.push_back(std::chrono::duration<double>(now - last).count() /
                          static_cast<double>(total - seen));
        last = now;
        seen = total;
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  r.latency = std::chrono::duration<double>(Clock::now() - start).count();
  r.output_len = static_cast<int>(seen);
  r.ok = sent && res.status == 200 && done;
  if (!r.ok) r.error = sent ? fmt::format("HTTP {}", res.status) : httplib::to_string(error);
  return r;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

int run(BenchServingFlags& f) {
  if (!f.extra_request_body.empty()) {
    f.extra = nlohmann::json::parse(f.extra_request_body, nullptr, false);
    if (!f.extra.is_object())
      fail(
          "--extra-request-body '{}' is not a JSON object; give one such as "
          "'{{\"sampling_params\": {{\"temperature\": 0.8}}}}'",
          f.extra_request_body);
  }
  if (f.dataset_name != "random" && f.dataset_name != "generated-shared-prefix")
    fail("--dataset-name '{}' is unknown: use random or generated-shared-prefix", f.dataset_name);
  if (f.num_prompts < 1 || f.random_input_len < 1 || f.random_output_len < 1 ||
      f.request_rate < 0 || f.max_concurrency < 0 ||
      !(f.random_range_ratio > 0 && f.random_range_ratio <= 1))
    fail(
        "--num-prompts, --random-input-len and --random-output-len must be >= 1, --request-rate "
        "and "
        "--max-concurrency >= 0, --random-range-ratio in (0, 1]");
  int vocab = f.vocab_size;
  {
    httplib::Client client(f.host, f.port);
    auto info = client.Get("/get_model_info");
    if (!info || info->status != 200)
      fail("no strata server answers at http://{}:{} (start one with `strata serve --port {}`)",
           f.host, f.port, f.port);
    if (vocab == 0) vocab = nlohmann::json::parse(info->body).value("vocab_size", 0);
    if (vocab < 1) fail("the server did not say its vocabulary size; pass --vocab-size");
  }
  const auto prompts = make_prompts(f, vocab);
  std::mt19937_64 rng(f.seed + 1);
  std::vector<double> arrival(prompts.size(), 0.0);  // seconds after the start
  if (f.request_rate > 0) {
    std::exponential_distribution<double> gap(f.request_rate);
    for (size_t i = 1; i < arrival.size(); ++i) arrival[i] = arrival[i - 1] + gap(rng);
  }
  const size_t workers =
      f.max_concurrency > 0 ? std::min<size_t>(f.max_concurrency, prompts.size()) : prompts.size();
  std::vector<Result> results(prompts.size());
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < prompts.size();) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrival[i])));
        results[i] = send_one(f, prompts[i]);
      }
    });
  for (auto& t : pool) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();

  int ok = 0;
  int64_t input = 0, output = 0;
  std::vector<double> ttft, itl, latency;
  std::string first_error;
  for (const auto& r : results) {
    if (!r.ok) {
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++ok;
    input += r.input_len;
    output += r.output_len;
    ttft.push_back(r.ttft * 1e3);
    latency.push_back(r.latency * 1e3);
    for (double x : r.itl) itl.push_back(x * 1e3);
  }
  nlohmann::json out = {{"dataset", f.dataset_name},
                        {"successful_requests", ok},
                        {"failed_requests", static_cast<int>(results.size()) - ok},
                        {"duration_s", duration},
                        {"total_input_tokens", input},
                        {"total_output_tokens", output},
                        {"request_throughput", ok / duration},
                        {"input_throughput", input / duration},
                        {"output_throughput", output / duration},
                        {"mean_ttft_ms", mean(ttft)},
                        {"median_ttft_ms", percentile(ttft, 50)},
                        {"p99_ttft_ms", percentile(ttft, 99)},
                        {"mean_itl_ms", mean(itl)},
                        {"median_itl_ms", percentile(itl, 50)},
                        {"p99_itl_ms", percentile(itl, 99)},
                        {"mean_e2e_latency_ms", mean(latency)},
                        {"median_e2e_latency_ms", percentile(latency, 50)}};
  if (!first_error.empty()) out["first_error"] = first_error;
  if (f.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "============ Serving Benchmark Result ============\n";
    for (const auto& [k, v] : out.items()) std::cout << fmt::format("{:<28}{}\n", k, v.dump());
    std::cout << "==================================================\n";
  }
  return ok == static_cast<int>(results.size()) ? 0 : 1;
}

}  // namespace

void add_bench_serving_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<BenchServingFlags>();
  CLI::App* cmd = app.add_subcommand("bench-serving",
                                     "load-test a running `strata serve` (throughput, TTFT, ITL)");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--host", f->host, "server address");
  cmd->add_option("--port", f->port, "server port");
  cmd->add_option("--dataset-name", f->dataset_name, "random | generated-shared-prefix");
  cmd->add_option("--num-prompts", f->num_prompts, "requests to send (random dataset)");
  cmd->add_option("--random-input-len", f->random_input_len, "prompt tokens");
  cmd->add_option("--random-output-len", f->random_output_len, "tokens to generate");
  cmd->add_option("--random-range-ratio", f->random_range_ratio,
                  "lengths drawn from [ratio * len, len]");
  cmd->add_option("--gsp-num-groups", f->gsp_num_groups, "shared-prefix groups");
  cmd->add_option("--gsp-prompts-per-group", f->gsp_prompts_per_group, "prompts per group");
  cmd->add_option("--gsp-system-prompt-len", f->gsp_system_prompt_len, "shared prefix tokens");
  cmd->add_option("--gsp-question-len", f->gsp_question_len, "tokens after the shared prefix");
  cmd->add_option("--gsp-output-len", f->gsp_output_len, "tokens to generate");
  cmd->add_option("--request-rate", f->request_rate,
                  "requests per second, Poisson arrivals (0: all at once)");
  cmd->add_option("--max-concurrency", f->max_concurrency,
                  "requests in flight at most (0: unlimited)");
  cmd->add_option("--seed", f->seed, "prompt and arrival randomness");
  cmd->add_option("--vocab-size", f->vocab_size,
                  "token ids are drawn below this (0: ask the server)");
  cmd->add_option("--extra-request-body", f->extra_request_body,
                  "JSON merged into every request (e.g. sampling_params)");
  cmd->add_flag("--json", f->json, "one JSON object");
  cmd->callback([f, &exit_code]() { exit_code = run_command([&] { return run(*f); }); });
}

}  // namespace strata::cli
