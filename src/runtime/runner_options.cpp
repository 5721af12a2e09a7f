// RunnerOptions: the checks of a runner's flags against the model (every problem at once,
// before anything is sized or read) and the choices derived from them (threads, weight dtype,
// Mamba state slots, the sliding-window space). ModelRunner (model_runner.cpp) builds from them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/threads.h"
#include "model/shard.h"
#include "runtime/capabilities.h"
#include "runtime/model_runner.h"

namespace strata {

namespace {

constexpr int kMaxThreads = 1024;
// One process per rank, each with its shard: more ranks than this is a typo, not a machine.
constexpr int kMaxTpSize = 256;

}  // namespace

void RunnerOptions::validate(const ModelConfig& config) const {
  const std::vector<std::string> found = problems(config);
  if (found.size() == 1) fail("{}", found.front());
  if (!found.empty()) fail("invalid configuration:\n  - {}", fmt::join(found, "\n  - "));
}

std::vector<std::string> RunnerOptions::problems(const ModelConfig& config) const {
  std::vector<std::string> problems;
  if (page_size < 1)
    problems.push_back(fmt::format("--page-size must be at least 1, got {}", page_size));
  if (device != "cpu" && device != "cuda")
    problems.push_back(fmt::format("--device '{}' is unknown: use cpu or cuda", device));
  if (device == "cuda") {
#ifdef STRATA_WITH_CUDA
    for (auto& p : cuda_configuration_problems(config, *this)) problems.push_back(std::move(p));
#else
    problems.push_back(
        "--device cuda: this build of strata has no CUDA backend; rebuild with "
        "-DSTRATA_CUDA=ON on a machine with the CUDA toolkit, or use --device cpu");
#endif
  }
  if (gpu_id < 0)
    problems.push_back(fmt::format("--base-gpu-id must be at least 0, got {}", gpu_id));
  else if (device == "cpu" && gpu_id != 0)
    problems.push_back(
        fmt::format("--base-gpu-id {} picks a GPU, but --device is cpu: add --device cuda or leave "
                    "--base-gpu-id out",
                    gpu_id));
  if (device == "cpu" && attention_backend != "auto" && attention_backend != "cpu")
    problems.push_back(
        fmt::format("--attention-backend '{}' is not available on {}: use auto or cpu",
                    attention_backend, device));
  if (max_running_requests < 1)
    problems.push_back(
        fmt::format("--max-running-requests must be at least 1, got {}", max_running_requests));
  if (max_context_len < 0)
    problems.push_back(fmt::format(
        "--context-length must be positive (0: the model's max_position_embeddings), got {}",
        max_context_len));
  if (max_total_tokens < 0)
    problems.push_back(
        fmt::format("--max-total-tokens must be positive (0: derived), got {}", max_total_tokens));
  // OpenMP and OpenBLAS allocate per thread and abort (or crash) far below INT_MAX threads.
  if (threads < 0 || threads > kMaxThreads)
    problems.push_back(
        fmt::format("--threads must be in 0..{} (0: all cores), got {}", kMaxThreads, threads));
  try {
    cpu::parse_thread_binding(cpu_bind);  // the names, and the message naming them, live there
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  if (!(mem_fraction_static > 0 && mem_fraction_static <= 1))
    problems.push_back(
        fmt::format("--mem-fraction-static must be in (0, 1] (a share of GPU memory), got {}",
                    mem_fraction_static));
  if (tp_size < 1 || tp_size > kMaxTpSize)
    problems.push_back(
        fmt::format("--tp-size must be in 1..{} (tensor-parallel ranks per stage), got {}",
                    kMaxTpSize, tp_size));
  else if (auto p = tensor_parallel_problem(config, tp_size))
    problems.push_back(std::move(*p));
  if (tensor_parallel && tensor_parallel->size() != tp_size)
    problems.push_back(
        fmt::format("this process's tensor-parallel group has {} ranks but "
                    "--tp-size is {}; start the job with mpirun -np (pp x tp)",
                    tensor_parallel->size(), tp_size));
  if (stage && (stage->start_layer < 0 || stage->end_layer > config.num_layers ||
                stage->start_layer > stage->end_layer))
    problems.push_back(fmt::format("stage layers [{}, {}) do not fit a model of {} layers",
                                   stage->start_layer, stage->end_layer, config.num_layers));
  if (max_mamba_cache_size < 0)
    problems.push_back(
        fmt::format("--max-mamba-cache-size must be positive, got {}", max_mamba_cache_size));
  try {
    parse_ssm_dtype(mamba_ssm_dtype);
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  if (dtype != "auto" && dtype != "bfloat16" && dtype != "float32")
    problems.push_back(fmt::format(
        "--dtype {}: the weights are stored as auto (f32 on cpu, bf16 on cuda), bfloat16 or "
        "float32 (cpu only); pass one of those",
        dtype));
  else if (device == "cuda" && dtype == "float32")
    problems.push_back(
        "--dtype float32: the CUDA path keeps weights in bf16 (f32 sums); use --dtype auto or "
        "bfloat16, or --device cpu for f32 weights");
  if (auto p = check_capability_value("quantization", quantization)) {
    problems.push_back(*p);
  } else if (auto q = check_capability("quantization", quantization, device)) {
    problems.push_back(*q);
  } else if (resolve_capability("quantization", quantization, device) != "none" &&
             dtype == "bfloat16") {
    problems.push_back(fmt::format(
        "--quantization {} with --dtype bfloat16: both choose how the weight matrices are "
        "stored (int8 keeps activations and everything else in f32); drop --dtype bfloat16",
        quantization));
  } else if (resolve_capability("quantization", quantization, device) != "none" && tp_size > 1) {
    // Packed int8 matrices interleave rows in groups of 16, so a rank's rows or columns are not
    // a slice of them; tensor-parallel shards of int8 weights are not built yet.
    problems.push_back(fmt::format(
        "--quantization {} with --tp-size {}: int8 weights run in one process per stage; use "
        "--tp-size 1 (or --quantization none)",
        quantization, tp_size));
  }
  // The Mamba cache flags matter only for models with recurrent layers; a typo is an error
  // for every model.
  const bool hybrid = !config.recurrent_layer_ids().empty();
  const std::string strategy_feature = "mamba_radix_cache_strategy";
  if (auto p = check_capability_value(strategy_feature, mamba_radix_cache_strategy)) {
    problems.push_back(*p);
  } else if (hybrid) {
    if (auto q = check_capability(strategy_feature, mamba_radix_cache_strategy, device))
      problems.push_back(*q);
  }
  if (mamba_track_interval < 1)
    problems.push_back(fmt::format(
        "--mamba-track-interval must be a positive multiple of --page-size ({}), got {}", page_size,
        mamba_track_interval));
  else if (radix_cache && hybrid && page_size >= 1 && resolved_mamba_strategy() == "extra_buffer" &&
           mamba_track_interval % page_size != 0)
    problems.push_back(fmt::format(
        "--mamba-track-interval {} is not a multiple of --page-size {}: state checkpoints must "
        "fall on page boundaries of the prefix cache; use {} or {}",
        mamba_track_interval, page_size,
        std::max(page_size, mamba_track_interval / page_size * page_size),
        (mamba_track_interval / page_size + 1) * page_size));
  return problems;
}

int RunnerOptions::mamba_state_slots() const {
  if (max_mamba_cache_size > 0) return max_mamba_cache_size;
  return max_running_requests * (radix_cache ? 2 : 1);
}

std::string RunnerOptions::resolved_mamba_strategy() const {
  return resolve_capability("mamba_radix_cache_strategy", mamba_radix_cache_strategy, device);
}

int RunnerOptions::resolved_max_context_len(const ModelConfig& config) const {
  return max_context_len > 0                  ? max_context_len
         : config.max_position_embeddings > 0 ? config.max_position_embeddings
                                              : 32768;
}

DType RunnerOptions::weight_dtype() const {
  if (resolve_capability("quantization", quantization, device) != "none") return DType::Q8;
  return dtype == "bfloat16" || (dtype == "auto" && device == "cuda") ? DType::BF16 : DType::F32;
}

WindowSpace RunnerOptions::window_space(const std::map<int, KVLayerLayout>& layouts,
                                        int max_context_len, int64_t full_slots) const {
  int window = 0;
  for (const auto& [_, l] : layouts) window = std::max(window, l.sliding_window);
  window = std::min(window, max_context_len);
  if (!hybrid_swa_memory || window == 0 || max_pass_tokens <= 0 ||
      check_capability("kv_window_space", "window", device))
    return {};
  // Between passes a running request holds the window slots from the window of the page
  // boundary before its last one (TokenMemory::trim_window: under window + 4 pages with the
  // rounding); during a pass, its new tokens too (at most max_pass_tokens over the pass, plus
  // a page each). The prefix cache's window pages are evicted before a request goes short,
  // so the space never runs out.
  const int64_t r = max_running_requests, p = page_size;
  const int64_t slots = r * (window + 5 * p) + max_pass_tokens;
  if (slots >= full_slots) return {};
  return WindowSpace{window, slots};
}

}  // namespace strata
