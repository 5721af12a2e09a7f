#include "cli/common_flags.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/log.h"
#include "dist/partition.h"

namespace strata::cli {

namespace {
// One process per stage, each with its own weights and KV cache: more stages than this is a
// typo, not a cluster.
constexpr int kMaxPipelineStages = 256;
}  // namespace

void ModelFlags::add_to(CLI::App& app) {
  app.add_option("--model,--model-path", model,
                 "Hugging Face model directory (config.json, safetensors)")
      ->required();
  app.add_option("--load-format", load_format,
                 "auto | safetensors | dummy (random weights from config.json)");
  app.add_option("--device", device, "cpu | cuda");
  app.add_option("--attention-backend", attention_backend, "auto | cpu | cuda");
  app.add_option(
      "--mem-fraction-static", mem_fraction_static,
      "GPU: share of device memory for weights and KV cache (the KV pool gets what weights leave)");
  app.add_flag("--disable-cuda-graph", disable_cuda_graph,
               "GPU: launch decode steps kernel by kernel");
  app.add_option("--base-gpu-id", base_gpu_id,
                 "GPU: the first GPU to use; pipeline stages take one GPU each from there");
  app.add_option("--page-size", page_size, "KV cache page size in tokens");
  pp_size_option =
      app.add_option("--pp-size", pp_size,
                     "pipeline-parallel stages, one process each (started through mpirun); with "
                     "--device cuda one GPU each");
  app.add_option("--tp-size", tp_size,
                 "tensor-parallel ranks per pipeline stage, one process each (started through "
                 "mpirun; --pp-size x --tp-size processes in all); on GPUs one GPU per rank "
                 "(NCCL), or a stage's ranks sharing its GPU when there are too few");
  app.add_option(
      "--pp-layer-partition", pp_layer_partition,
      "decoder layers per stage, like 2,3,3 (default: even split, remainder on the last stages)");
  app.add_option("--pp-timeout", pp_timeout,
                 "seconds a stage waits for another before the job fails");
  app.add_option("--threads", threads,
                 "CPU threads (0: every CPU this process may use, shared among the processes of a "
                 "job on one machine)");
  app.add_option("--cpu-bind", cpu_bind,
                 "CPU: auto (threads pinned one per CPU during a pass when they fill this "
                 "process's CPUs, the processes of a job on one machine on different ones) | "
                 "cores (pinned whatever their number) | none");
  app.add_option("--context-length", context_length, "maximum tokens per request (0: from config)");
  app.add_option("--max-total-tokens", max_total_tokens, "KV cache size in tokens (0: derived)");
  app.add_option("--seed,--random-seed", seed, "random seed (sampling, dummy weights)");
  app.add_option("--max-mamba-cache-size", max_mamba_cache_size,
                 "recurrent (Mamba) state slots in all: running requests and the prefix cache's "
                 "snapshots (0: --max-running-requests, 2x that when serving with the prefix "
                 "cache)");
  app.add_option("--dtype", dtype,
                 "weight storage: auto (f32 on cpu, bf16 on cuda) | bfloat16 | float32 (cpu)");
  app.add_option("--quantization", quantization,
                 "weight matrices quantized at load: none | int8 (cpu: int8 with a scale per 64 "
                 "columns, activations quantized on the fly) | w8a8_int8 (SGLang's name for it)");
  app.add_option("--mamba-ssm-dtype", mamba_ssm_dtype,
                 "storage dtype of the SSM state: float32 | bfloat16");
  app.add_option("--mamba-radix-cache-strategy", mamba_radix_cache_strategy,
                 "prefix caching of recurrent state: auto | no_buffer (snapshots where prompts "
                 "and requests end) | extra_buffer (also every --mamba-track-interval prompt "
                 "tokens); checked against the device");
  app.add_option("--mamba-track-interval", mamba_track_interval,
                 "extra_buffer: prompt tokens between state snapshots (a multiple of "
                 "--page-size)");
  app.add_option("--log-level", log_level, "debug | info | warning | error");
}

RunnerOptions ModelFlags::runner_options(const ModelConfig* config) const {
  if (!log::set_level(log_level))
    fail("--log-level must be one of debug, info, warning, error; got '{}'", log_level);
  if (page_size < 1) fail("--page-size must be at least 1, got {}", page_size);
  if (config && config->max_position_embeddings > 0 &&
      context_length > config->max_position_embeddings)
    fail(
        "--context-length {} exceeds the model's max_position_embeddings {} ({}/config.json): "
        "positions beyond it were never trained; use at most {}",
        context_length, config->max_position_embeddings, config->model_dir,
        config->max_position_embeddings);
  RunnerOptions o;
  o.device = device;
  o.attention_backend = attention_backend;
  o.page_size = page_size;
  o.mem_fraction_static = mem_fraction_static;
  o.cuda_graph = !disable_cuda_graph;
  o.gpu_id = base_gpu_id;
  o.threads = threads;
  o.cpu_bind = cpu_bind;
  o.tp_size = tp_size;
  o.report_load = true;
  o.max_context_len = context_length;
  o.max_total_tokens = max_total_tokens;
  o.load_format = parse_load_format(load_format);
  o.seed = seed;
  o.max_mamba_cache_size = max_mamba_cache_size;
  o.mamba_ssm_dtype = mamba_ssm_dtype;
  o.dtype = dtype;
  o.quantization = quantization;
  o.mamba_radix_cache_strategy = mamba_radix_cache_strategy;
  o.mamba_track_interval = mamba_track_interval;
  return o;
}

PipelineSetup ModelFlags::pipeline_setup() const {
  const bool pp_size_given = pp_size_option && pp_size_option->count() > 0;
  if (pp_size_given && (pp_size < 1 || pp_size > kMaxPipelineStages))
    fail("--pp-size must be in 1..{} (pipeline stages), got {}", kMaxPipelineStages, pp_size);
  if (!(pp_timeout > 0) || !std::isfinite(pp_timeout))
    fail("--pp-timeout must be a positive number of seconds, got {}", pp_timeout);
  PipelineSetup setup;
  if (!pp_layer_partition.empty())
    setup.layers_per_stage = parse_layer_partition(pp_layer_partition);
  // Without --pp-size, a partition says how many stages there are.
  setup.pp_size =
      pp_size > 0 ? pp_size : std::max<int>(1, static_cast<int>(setup.layers_per_stage.size()));
  setup.timeout_s = pp_timeout;
  return setup;
}

int run_command(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "error: out of memory; use a smaller model, batch or --max-total-tokens\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace strata::cli
