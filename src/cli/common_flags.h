#pragma once
// Flags shared by the commands that load a model (generate, bench-one-batch, serve).
#include <CLI/CLI.hpp>
#include <string>

#include "dist/pipeline_job.h"
#include "runtime/model_runner.h"

namespace strata::cli {

struct ModelFlags {
  std::string model;
  std::string load_format = "auto";
  std::string device = "cpu";
  std::string attention_backend = "auto";
  int page_size = 1;
  int pp_size = 0;                 // 0: not given (1, or the length of --pp-layer-partition)
  std::string pp_layer_partition;  // "a,b,...": layers per stage
  double pp_timeout = 600;
  int tp_size = 1;  // tensor-parallel ranks per stage (one process each)         // seconds a stage
                    // waits for another before the job fails
  double mem_fraction_static = 0.88;
  bool disable_cuda_graph = false;
  int base_gpu_id = 0;
  int threads = 0;
  std::string cpu_bind = "auto";
  int context_length = 0;
  int64_t max_total_tokens = 0;
  uint64_t seed = 0;
  int max_mamba_cache_size = 0;
  std::string mamba_ssm_dtype = "float32";
  std::string dtype = "auto";
  std::string quantization = "none";
  std::string mamba_radix_cache_strategy = "auto";
  int mamba_track_interval = 256;
  // The log on stderr (core/log.h): the load progress, the startup configuration and memory
  // plan at info; serve's request and batch lines too.
  std::string log_level = "info";

  // Set by add_to: whether --pp-size was given (0 and negative sizes are then errors).
  const CLI::Option* pp_size_option = nullptr;

  void add_to(CLI::App& app);
  // Validated runner options (throws Error naming each bad flag). Pipeline flags are read by
  // the commands that run pipelines (pipeline_setup). With the model's config, the flags that
  // depend on it are checked too (--context-length against max_position_embeddings).
  RunnerOptions runner_options(const ModelConfig* config = nullptr) const;
  // The pipeline flags, resolved (throws Error for a malformed --pp-layer-partition).
  PipelineSetup pipeline_setup() const;
};

// Runs `body`, turning strata errors into one message on stderr and exit code 1.
int run_command(const std::function<int()>& body);

}  // namespace strata::cli
