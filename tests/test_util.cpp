#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/json_util.h"
#include "model/safetensors.h"

namespace strata::test {

namespace {

class ScratchDir {
 public:
  ScratchDir()
      : path_(std::filesystem::temp_directory_path() /
              ("strata_tests_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace

std::string scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

std::string fixture_dir(const std::string& name) {
  return std::string(STRATA_MODEL_DATA) + "/" + name;
}

Reference load_reference(const std::string& fixture) {
  const std::string dir = fixture_dir(fixture);
  SafetensorsFile file(dir + "/reference.safetensors");
  Reference ref;
  auto ints = [&](const std::string& name) {
    const TensorInfo& t = file.tensors().at(name);
    std::vector<int> v(t.numel());
    const auto* p = reinterpret_cast<const int64_t*>(t.data);
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<int>(p[i]);
    return v;
  };
  auto floats = [&](const std::string& name) {
    const TensorInfo& t = file.tensors().at(name);
    Tensor out(t.shape);
    convert_to_f32(t.dtype, t.data, out.data(), t.numel());
    return out;
  };
  for (int i = 0;; ++i) {
    const std::string p = "p" + std::to_string(i) + ".";
    if (!file.tensors().count(p + "input_ids")) break;
    ref.input_ids.push_back(ints(p + "input_ids"));
    ref.greedy_ids.push_back(ints(p + "greedy_ids"));
    ref.logits.push_back(floats(p + "logits"));
    ref.greedy_logits.push_back(floats(p + "greedy_logits"));
  }
  const json meta = read_json_file(dir + "/reference.json");
  ref.min_greedy_margin = meta.value("min_greedy_margin", 0.0);
  if (std::filesystem::exists(dir + "/routing_margins.json")) {
    const json margins = read_json_file(dir + "/routing_margins.json");
    for (const json& p : margins.at("prompts"))
      ref.min_routing_gap.push_back(p.at("min_gap").get<double>());
    EXPECT_EQ(ref.min_routing_gap.size(), ref.input_ids.size()) << dir << "/routing_margins.json";
  }
  return ref;
}

int routing_stable_prompt(const Reference& ref) {
  constexpr double kRouterInputBf16Noise = 1e-3;
  for (int i = static_cast<int>(ref.input_ids.size()) - 1; i >= 0; --i)
    if (ref.min_routing_gap.empty() || ref.min_routing_gap.at(i) >= kRouterInputBf16Noise)
      return ref.input_ids[i].size() > 1 ? i : -1;  // one token has nothing to chunk
  return -1;
}

RunnerOptions default_options(int page_size, int max_requests) {
  RunnerOptions o;
  o.page_size = page_size;
  o.max_running_requests = max_requests;
  o.max_context_len = 256;
  o.max_total_tokens = 4096;
  // Passes of the tests stay under this: sliding-window fixtures keep their window space.
  o.max_pass_tokens = 2048;
  o.threads = 2;
  return o;
}

Tensor prefill_all_logits(ModelRunner& runner, const std::vector<int>& ids, int chunk) {
  TokenMemory& memory = runner.memory();
  const int row = memory.req_to_token().alloc();
  const int state_slot = runner.state_pool() ? runner.state_pool()->alloc() : -1;
  const int n = static_cast<int>(ids.size());
  const int vocab = runner.config().vocab_size;
  Tensor all({n, vocab});
  int done = 0;
  while (done < n) {
    const int len = chunk > 0 ? std::min(chunk, n - done) : n;
    ForwardBatch b;
    b.mode = ForwardMode::Extend;
    b.return_all_logits = true;
    std::vector<int32_t> slots(len);
    EXPECT_TRUE(memory.extend(row, done, done + len, slots.data()));
    b.req_pool_indices = {row};
    b.prefix_lens = {done};
    b.extend_lens = {len};
    b.state_slots = {state_slot};
    for (int i = 0; i < len; ++i) {
      b.input_ids.push_back(ids[done + i]);
      b.positions.push_back(done + i);
      b.out_cache_loc.push_back(slots[i]);
    }
    Tensor logits = runner.forward(b);
    std::copy(logits.data(), logits.data() + logits.numel(), all.row(done));
    done += len;
  }
  memory.release(row, n);
  if (state_slot >= 0) runner.state_pool()->free(state_slot);
  return all;
}

std::vector<GenerateOutput> greedy(ModelRunner& runner,
                                   const std::vector<std::vector<int>>& prompts, int max_new_tokens,
                                   bool return_logits, int chunk) {
  std::vector<GenerateRequest> reqs;
  for (const auto& p : prompts) {
    GenerateRequest r;
    r.input_ids = p;
    r.sampling.max_new_tokens = max_new_tokens;
    r.sampling.stop_at_eos = false;
    reqs.push_back(r);
  }
  GenerateOptions o;
  o.return_logits = return_logits;
  o.chunked_prefill_size = chunk;
  return generate(runner, reqs, o);
}

double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return max_abs_diff(a.data(), b.data(), std::min(a.numel(), b.numel()));
}

int run_strata(const std::string& args, std::string* out, std::string* err) {
  return run_command(std::string(STRATA_BINARY) + " " + args, out, err);
}

int run_command(const std::string& command, std::string* out, std::string* err) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("strata_test_" + std::to_string(::getpid()) +
                                                    "_" + std::to_string(std::rand()));
  const std::string cmd = command + " >" + tmp.string() + ".out 2>" + tmp.string() + ".err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  if (out) *out = slurp(tmp.string() + ".out");
  if (err) *err = slurp(tmp.string() + ".err");
  fs::remove(tmp.string() + ".out");
  fs::remove(tmp.string() + ".err");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

RunnerOptions hybrid_cache_options(const std::string& strategy, int page_size, int max_requests,
                                   int track_interval) {
  RunnerOptions o = default_options(page_size, max_requests);
  o.mamba_radix_cache_strategy = strategy;
  o.mamba_track_interval = track_interval;
  o.radix_cache = true;
  return o;
}

std::vector<int> synthetic_tokens(int n, int seed) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back((seed * 131 + i * 37 + 11) % 500);
  return v;
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace strata::test
