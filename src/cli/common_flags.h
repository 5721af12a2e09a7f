#pragma once
// Flags shared by the commands that load a model (generate, bench-one-batch, serve).
#include <CLI/CLI.hpp>
#include <string>

#include "runtime/model_runner.h"

namespace strata::cli {

struct ModelFlags {
  std::string model;
  std::string load_format = "auto";
  std::string device = "cpu";
  std::string attention_backend = "auto";
  int page_size = 1;
  int pp_size = 1;
  int threads = 0;
  int context_length = 0;
  int64_t max_total_tokens = 0;
  uint64_t seed = 0;
  int max_mamba_cache_size = 0;
  std::string mamba_ssm_dtype = "float32";
  std::string mamba_radix_cache_strategy = "auto";

  void add_to(CLI::App& app);
  // Validated runner options (throws Error naming each bad flag).
  RunnerOptions runner_options() const;
};

// Runs `body`, turning strata errors into one message on stderr and exit code 1.
int run_command(const std::function<int()>& body);

}  // namespace strata::cli
