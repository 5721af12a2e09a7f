#include "pipeline_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

namespace strata::test {

Generation run_generate(const std::string& args) {
  std::string out, err;
  const int code = run_strata("generate --json " + args, &out, &err);
  EXPECT_EQ(code, 0) << args << "\n" << err;
  Generation g;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    g.ids.push_back(j["output_ids"].get<std::vector<int>>());
    if (j.contains("logits"))
      g.logits.push_back(j["logits"].get<std::vector<std::vector<float>>>());
  }
  return g;
}

int run_generate_bounded(const std::string& args, std::string* err, double* seconds) {
  namespace fs = std::filesystem;
  const std::string base =
      (fs::temp_directory_path() /
       ("strata_bounded_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand())))
          .string();
  const std::string cmd = "timeout -k 5 120 " + std::string(STRATA_BINARY) + " generate " + args +
                          " >" + base + ".out 2>" + base + ".err";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream in(base + ".err");
  std::stringstream ss;
  ss << in.rdbuf();
  *err = ss.str();
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void expect_same(const Generation& a, const Generation& b, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(a.ids.size(), b.ids.size()) << what;
  for (size_t p = 0; p < a.ids.size(); ++p) {
    EXPECT_EQ(a.ids[p], b.ids[p]) << what << ", prompt " << p;
    ASSERT_EQ(a.logits[p].size(), b.logits[p].size()) << what;
    for (size_t s = 0; s < a.logits[p].size(); ++s) {
      ASSERT_EQ(a.logits[p][s].size(), b.logits[p][s].size());
      EXPECT_LE(max_abs_diff(a.logits[p][s].data(), b.logits[p][s].data(), a.logits[p][s].size()),
                tolerance)
          << what << ", prompt " << p << " step " << s;
    }
  }
}

std::vector<std::vector<int>> pipeline_test_prompts(const Reference& ref) {
  auto prompts = ref.input_ids;
  prompts.emplace_back(ref.input_ids.back().begin(), ref.input_ids.back().begin() + 30);
  return prompts;
}

std::string write_prompts_file(const std::vector<std::vector<int>>& prompts) {
  static int files = 0;
  const auto path =
      std::filesystem::path(scratch_dir()) / ("prompts_" + std::to_string(files++) + ".txt");
  std::ofstream out(path);
  for (const auto& p : prompts) {
    for (size_t i = 0; i < p.size(); ++i) out << (i ? "," : "") << p[i];
    out << "\n";
  }
  return path.string();
}

void expect_gpu_faults_end_the_job(const std::string& args, const std::string& label) {
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"exit:1", "error: "},      {"hang:0", "hung or dead"}, {"hang:1", "hung or dead"},
      {"oom:1", "out of memory"}, {"trap:0", "CUDA error"},
  };
  for (const auto& [fault, message] : faults) {
    setenv("STRATA_PP_FAULT", fault.c_str(), 1);
    std::string err;
    double seconds = 0;
    const int code = run_generate_bounded(args, &err, &seconds);
    unsetenv("STRATA_PP_FAULT");
    EXPECT_NE(code, 0) << fault;
    EXPECT_NE(code, 124) << fault << ": the job did not end by itself";
    EXPECT_LT(seconds, 60) << fault;
    EXPECT_NE(err.find(message), std::string::npos) << fault << "\n" << err;
    std::printf("[ %-8s ] fault %s: exit %d after %.1f s\n", label.c_str(), fault.c_str(), code,
                seconds);
    std::fflush(stdout);
  }
}

double row_std(const std::vector<float>& row) {
  double sum = 0, sq = 0;
  for (float v : row) sum += v, sq += double(v) * v;
  const double mean = sum / row.size();
  return std::sqrt(std::max(0.0, sq / row.size() - mean * mean));
}

double margin(const std::vector<float>& row) {
  std::vector<float> v = row;
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  return v[0] - v[1];
}

}  // namespace strata::test
