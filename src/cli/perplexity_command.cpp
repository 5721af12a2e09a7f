// strata perplexity: the perplexity of a model on a text file (as llama.cpp's
// llama-perplexity): the text is encoded with the model's tokenizer, cut into windows of
// --context-length tokens every --stride tokens (runtime/perplexity.h says which tokens each
// window scores), and every window runs through the ordinary generate loop as one prompt,
// on any device and as pipeline stages with --pp-size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"
#include "dist/launch.h"
#include "dist/partition.h"
#include "dist/pipeline_job.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {

struct PerplexityFlags {
  ModelFlags model;
  std::string text_file;
  std::string tokenizer;  // default: the model directory
  int stride = 0;         // 0: half the context length
  int batch_size = 0;     // 0: auto
  int chunked_prefill_size = 0;
  bool json = false;
};

void print_result(const PerplexityFlags& f, const PerplexityResult& r, int context_length,
                  int stride, size_t bytes, double seconds) {
  // Bits per byte compare models whose tokenizers differ (perplexity per token does not).
  const double bits_per_byte = r.nll_sum / std::log(2.0) / static_cast<double>(bytes);
  if (f.json) {
    nlohmann::json j;
    j["text_file"] = f.text_file;
    j["bytes"] = bytes;
    j["tokens"] = r.tokens;
    j["context_length"] = context_length;
    j["stride"] = stride;
    j["windows"] = r.windows;
    j["tokens_scored"] = r.tokens_scored;
    j["mean_nll"] = r.mean_nll();
    j["perplexity"] = r.perplexity();
    j["bits_per_byte"] = bits_per_byte;
    j["seconds"] = seconds;
    std::cout << j.dump() << "\n";
  } else {
    std::printf("%s: %zu bytes, %d tokens, %d windows of %d tokens every %d\n", f.text_file.c_str(),
                bytes, r.tokens, r.windows, context_length, stride);
    std::printf("tokens scored %lld  mean NLL %.6f  perplexity %.4f  bits/byte %.4f  (%.2f s)\n",
                static_cast<long long>(r.tokens_scored), r.mean_nll(), r.perplexity(),
                bits_per_byte, seconds);
  }
  std::fflush(stdout);
}

int run(const PerplexityFlags& f) {
  if (f.text_file.empty()) fail("give --text-file FILE: the text to score");
  std::ifstream in(f.text_file, std::ios::binary);
  if (!in) fail("cannot read --text-file {}", f.text_file);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (f.batch_size < 0) fail("--batch-size must be at least 1 (0: auto), got {}", f.batch_size);
  const auto started = std::chrono::steady_clock::now();

  const ModelConfig config = ModelConfig::load(f.model.model);
  const auto tokenizer = tok::Tokenizer::load(f.tokenizer.empty() ? f.model.model : f.tokenizer);
  // As transformers' encode(): with the tokenizer's special tokens (BOS, where it adds one).
  const std::vector<int> ids = tokenizer.encode(text, /*add_special_tokens=*/true);

  RunnerOptions options = f.model.runner_options();
  PerplexityOptions p;
  // Default: the model's context length, at most 1024 (what fits the all-token logits of a
  // batch of windows in memory for large vocabularies).
  p.context_length = f.model.context_length > 0
                         ? f.model.context_length
                         : std::min(options.resolved_max_context_len(config), 1024);
  p.stride = f.stride > 0 ? f.stride : std::max(1, p.context_length / 2);
  // Auto: as many windows (at most 16) as keep their logits, kept for every token, in 1 GiB.
  const int64_t window_logits = int64_t{p.context_length} * config.vocab_size;
  p.batch_size =
      f.batch_size > 0
          ? f.batch_size
          : static_cast<int>(std::clamp<int64_t>((int64_t{1} << 28) / window_logits, 1, 16));
  p.chunked_prefill_size = f.chunked_prefill_size;
  const auto windows = perplexity_windows(static_cast<int>(ids.size()), p.context_length, p.stride);
  const auto requests = perplexity_requests(ids, windows);
  // A window of context_length tokens and the one token every request generates.
  options.max_context_len = p.context_length + 1;
  const PipelineSetup pipeline = f.model.pipeline_setup();
  const bool pipelined = pipeline.pp_size > 1;
  // One process runs batch_size windows per generate call; pipeline stages take every window
  // in one job, in micro-batches of at most batch_size windows.
  const int running = pipelined ? static_cast<int>(requests.size())
                                : std::min<int>(p.batch_size, static_cast<int>(requests.size()));
  options.max_running_requests = running;
  if (options.max_total_tokens == 0)
    options.max_total_tokens =
        kv_slots_needed(std::vector<GenerateRequest>(requests.begin(), requests.begin() + running),
                        options.page_size);
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };

  if (pipelined) {
    GenerateOptions gen;
    gen.return_input_logprobs = true;
    gen.chunked_prefill_size = f.chunked_prefill_size;
    const int groups = (static_cast<int>(requests.size()) + p.batch_size - 1) / p.batch_size;
    gen.micro_batches = std::max(pipeline.pp_size, groups);
    if (!inside_mpi_job()) {
      validate_pipeline_job(config, options, pipeline, requests);
      return relaunch_under_mpirun(pipeline.pp_size);
    }
    run_pipeline_stage(
        config, options, pipeline, requests, gen,
        [&](int, bool is_last, const std::vector<GenerateOutput>& outputs, const GenerateStats&) {
          if (!is_last) return;
          PerplexityResult r;
          r.tokens = static_cast<int>(ids.size());
          r.windows = static_cast<int>(windows.size());
          accumulate_perplexity(windows, 0, outputs, &r);
          print_result(f, r, p.context_length, p.stride, text.size(), seconds());
        });
    return 0;
  }
  if (!pipeline.layers_per_stage.empty())
    partition_layers(config.num_layers, 1, pipeline.layers_per_stage);
  ModelRunner runner(config, options);
  const PerplexityResult r = perplexity(runner, ids, p);
  print_result(f, r, p.context_length, p.stride, text.size(), seconds());
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "perplexity of a model on a text file (sliding windows of --context-length tokens)");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  flags->model.add_to(*cmd);
  cmd->add_option("--text-file", flags->text_file, "the text to score (UTF-8)")->required();
  cmd->add_option("--tokenizer-path,--tokenizer", flags->tokenizer,
                  "directory with tokenizer.json (default: --model)");
  cmd->add_option("--stride", flags->stride,
                  "tokens between window starts; each window scores the tokens no earlier one "
                  "did (default: half of --context-length; --context-length: disjoint windows)");
  cmd->add_option("--batch-size", flags->batch_size,
                  "windows per forward pass, their logits kept for every token (0: auto, as "
                  "many as fit 1 GiB of logits, at most 16)");
  cmd->add_option("--chunked-prefill-size", flags->chunked_prefill_size,
                  "feed windows in pieces of this many tokens (0 = whole)");
  cmd->add_flag("--json", flags->json, "one JSON object");
  cmd->callback([flags, &exit_code]() { exit_code = run_command([&] { return run(*flags); }); });
}

}  // namespace strata::cli
