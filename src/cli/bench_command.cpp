// strata bench-one-batch: time one static batch, as SGLang's bench_one_batch does: one
// prefill of batch x input-len tokens, then output-len - 1 decode steps. Prints latency and
// throughput; the model is usually built with --load-format dummy from a config alone.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"
#include "dist/launch.h"
#include "dist/mpi_transport.h"
#include "runtime/model_runner.h"

namespace strata::cli {

namespace {

struct BenchFlags {
  ModelFlags model;
  int batch_size = 1;
  int input_len = 128;
  int output_len = 16;
  bool json = false;
  bool warmup = true;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The timed batch on `runner`; every tensor-parallel rank runs it alike (the same random
// prompts from the same seed, the same drawn ids).
nlohmann::json time_one_batch(const BenchFlags& f, const ModelConfig& config, ModelRunner& runner) {
  TokenMemory& memory = runner.memory();
  // Tensor-parallel: the decode steps' time inside the group's collectives.
  const Communicator* group = runner.options().tensor_parallel;
  double decode_collective_s = 0;

  std::mt19937 rng(static_cast<uint32_t>(f.model.seed));
  std::uniform_int_distribution<int> token(0, config.vocab_size - 1);
  double prefill_s = 0;
  std::vector<double> step_s;
  // One untimed round first (unless --no-warmup): GPU kernels load and cuBLAS picks its
  // algorithms on first use, which is not the steady state this command measures.
  const int rounds = f.warmup ? 2 : 1;
  for (int round = 0; round < rounds; ++round) {
    const bool timed = round == rounds - 1;
    const int output_len = timed ? f.output_len : std::min(f.output_len, 3);
    std::vector<int> rows, state_slots;  // state slots only for models with recurrent layers
    ForwardBatch prefill;
    prefill.mode = ForwardMode::Extend;
    for (int b = 0; b < f.batch_size; ++b) {
      const int row = memory.req_to_token().alloc();
      rows.push_back(row);
      state_slots.push_back(runner.state_pool() ? runner.state_pool()->alloc() : -1);
      std::vector<int32_t> slots(f.input_len);
      STRATA_CHECK(memory.extend(row, 0, f.input_len, slots.data()), "KV cache too small");
      prefill.req_pool_indices.push_back(row);
      prefill.prefix_lens.push_back(0);
      prefill.extend_lens.push_back(f.input_len);
      prefill.state_slots.push_back(state_slots.back());
      for (int i = 0; i < f.input_len; ++i) {
        prefill.input_ids.push_back(token(rng));
        prefill.positions.push_back(i);
        prefill.out_cache_loc.push_back(slots[i]);
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> next = runner.forward_sampled(prefill).ids;
    if (timed) prefill_s = seconds_since(t0);

    const double collective_start = group ? group->seconds() : 0.0;
    for (int step = 1; step < output_len; ++step) {
      ForwardBatch decode;
      decode.mode = ForwardMode::Decode;
      const int pos = f.input_len + step - 1;
      for (int b = 0; b < f.batch_size; ++b) {
        int32_t slot;
        STRATA_CHECK(memory.extend(rows[b], pos, pos + 1, &slot), "KV cache too small");
        decode.input_ids.push_back(next[b]);
        decode.positions.push_back(pos);
        decode.out_cache_loc.push_back(slot);
        decode.req_pool_indices.push_back(rows[b]);
        decode.prefix_lens.push_back(pos);
        decode.extend_lens.push_back(1);
        decode.state_slots.push_back(state_slots[b]);
      }
      t0 = std::chrono::steady_clock::now();
      next = runner.forward_sampled(decode).ids;
      if (timed) step_s.push_back(seconds_since(t0));
    }
    if (timed && group) decode_collective_s = group->seconds() - collective_start;
    for (int b = 0; b < f.batch_size; ++b) {
      memory.release(rows[b], f.input_len + output_len - 1);
      if (state_slots[b] >= 0) runner.state_pool()->free(state_slots[b]);
    }
  }
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  double decode_total = 0;
  for (double s : step_s) decode_total += s;

  nlohmann::json j;
  j["model"] = f.model.model;
  j["architecture"] = config.architecture;
  j["device"] = runner.options().device;
  j["batch_size"] = f.batch_size;
  j["input_len"] = f.input_len;
  j["output_len"] = f.output_len;
  j["prefill_latency_s"] = prefill_s;
  j["prefill_throughput_tok_s"] = f.batch_size * f.input_len / prefill_s;
  j["decode_median_latency_ms"] = median * 1e3;
  j["decode_throughput_tok_s"] = step_s.empty() ? 0.0 : f.batch_size * step_s.size() / decode_total;
  j["decode_steps"] = step_s.size();
  j["runner"] = runner.describe();
  if (group) {
    j["tp_size"] = group->size();
    if (group->untimed_calls() > 0) {
      // NCCL collectives captured into CUDA graphs: the replayed steps' collectives are not
      // seen by the host, so a figure would only count the eager ones.
      j["decode_tp_collective_s"] = nullptr;
      j["decode_tp_collective_share"] = nullptr;
      j["decode_tp_collective_note"] =
          "collectives inside CUDA graphs are not timed; --disable-cuda-graph times them";
    } else {
      j["decode_tp_collective_s"] = decode_collective_s;
      j["decode_tp_collective_share"] = decode_total > 0 ? decode_collective_s / decode_total : 0.0;
    }
  }
  return j;
}

void print(const BenchFlags& f, const nlohmann::json& j) {
  if (f.json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "prefill: " << j["prefill_latency_s"].get<double>() * 1e3 << " ms, "
              << j["prefill_throughput_tok_s"].get<double>() << " tok/s\ndecode: median "
              << j["decode_median_latency_ms"].get<double>() << " ms/step, "
              << j["decode_throughput_tok_s"].get<double>() << " tok/s\n";
  }
}

int run(const BenchFlags& f) {
  if (f.batch_size < 1 || f.input_len < 1 || f.output_len < 1)
    fail("--batch-size, --input-len and --output-len must be at least 1");
  const PipelineSetup pipeline = f.model.pipeline_setup();
  if (pipeline.pp_size > 1)
    fail(
        "bench-one-batch runs one stage; for pipeline-parallel throughput run strata generate "
        "--pp-size N --timing with enough prompts to fill the pipeline (docs/benchmarks.md)");
  const ModelConfig config = ModelConfig::load(f.model.model);
  RunnerOptions options = f.model.runner_options();
  options.max_running_requests = f.batch_size;
  const int64_t per_request =
      (f.input_len + f.output_len + options.page_size - 1) / options.page_size * options.page_size;
  options.max_total_tokens = per_request * f.batch_size;
  options.max_context_len = std::max(options.max_context_len, f.input_len + f.output_len);
  if (options.tp_size > 1) {
    // One process per tensor-parallel rank, started as generate starts them; rank 0 prints.
    if (!inside_mpi_job()) {
      validate_pipeline_job(config, options, pipeline, {});
      return relaunch_under_mpirun(options.tp_size);
    }
    run_stage_process(config, options, pipeline, false, [&](StageContext& stage) {
      const nlohmann::json j = time_one_batch(f, config, stage.runner);
      if (stage.control.tp_rank() == 0) print(f, j);
    });
    return 0;
  }
  ModelRunner runner(config, options);
  print(f, time_one_batch(f, config, runner));
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd =
      app.add_subcommand("bench-one-batch", "time prefill and decode of one static batch");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  flags->model.add_to(*cmd);
  cmd->add_option("--batch-size", flags->batch_size, "requests in the batch");
  cmd->add_option("--input-len", flags->input_len, "prompt tokens per request");
  cmd->add_option("--output-len", flags->output_len, "tokens generated per request");
  cmd->add_flag("--json", flags->json, "print one JSON object");
  cmd->add_flag("!--no-warmup", flags->warmup,
                "time the first round too (no untimed warm-up round)");
  cmd->callback([flags, &exit_code]() { exit_code = run_command([&] { return run(*flags); }); });
}

}  // namespace strata::cli
