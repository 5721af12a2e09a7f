// What runs on --device cuda, as data: one row per architecture with a GPU executor. Startup
// checks a configuration against this table and reports every problem before any weight
// is read (DESIGN.md §1.4).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>

#include "core/error.h"
#include "dist/gpu_assignment.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/llama_executor.h"

namespace strata {

namespace {

using ExecutorBuilder =
    std::function<std::unique_ptr<DeviceExecutor>(const ModelConfig&, const RunnerOptions&)>;

ExecutorBuilder llama_family(LlamaVariant variant) {
  return [variant](const ModelConfig& c, const RunnerOptions& o) {
    return make_cuda_llama_executor(c, o, variant);
  };
}

const std::map<std::string, ExecutorBuilder>& cuda_executors() {
  static const std::map<std::string, ExecutorBuilder> kExecutors = {
      {"LlamaForCausalLM", llama_family({})},
      {"MistralForCausalLM", llama_family({})},
      {"Qwen2ForCausalLM", llama_family({.qkv_bias = true, .qk_norm = false})},
      {"Qwen3ForCausalLM", llama_family({.qkv_bias = false, .qk_norm = true})},
  };
  return kExecutors;
}

}  // namespace

bool cuda_available(std::string* why) {
  return cuda::device_present(why);
}

int cuda_device_count() {
  return cuda::device_count();
}

std::vector<std::string> cuda_configuration_problems(const ModelConfig& c, const RunnerOptions& o) {
  std::vector<std::string> problems;
  std::vector<std::string> names;
  for (const auto& [name, _] : cuda_executors()) names.push_back(name);
  if (!cuda_executors().count(c.architecture))
    problems.push_back(
        fmt::format("--device cuda does not run {} yet (it runs {}): use --device cpu",
                    c.architecture, fmt::join(names, ", ")));
  if (o.attention_backend != "auto" && o.attention_backend != "cuda")
    problems.push_back(
        fmt::format("--attention-backend '{}' is not available on cuda: use auto or cuda",
                    o.attention_backend));
  if (!(o.mem_fraction_static > 0.0 && o.mem_fraction_static <= 1.0))
    problems.push_back(
        fmt::format("--mem-fraction-static must be in (0, 1], got {}", o.mem_fraction_static));
  if (c.head_dim % 8 != 0 || c.head_dim > 256)
    problems.push_back(fmt::format(
        "--device cuda needs a head_dim that is a multiple of 8 up to 256; this model's "
        "is {}: use --device cpu",
        c.head_dim));
  for (int id : c.attention_layer_ids()) {
    const auto kind = c.layers[id].attention;
    if (kind != AttentionKind::Full && kind != AttentionKind::Sliding) {
      problems.push_back(fmt::format(
          "layer {} is {} attention, which --device cuda does not run yet", id, to_string(kind)));
      break;
    }
  }
  std::string why;
  if (problems.empty() && !cuda::device_present(&why))
    problems.push_back(fmt::format("--device cuda: {}; use --device cpu", why));
  else if (problems.empty() && o.gpu_id >= 0) {  // a negative id: RunnerOptions::validate
    const std::string p = gpu_assignment_problem(o.gpu_id, 1, cuda::device_count());
    if (!p.empty()) problems.push_back(p);
  }
  return problems;
}

std::unique_ptr<DeviceExecutor> make_cuda_executor(const ModelConfig& config,
                                                   const RunnerOptions& options) {
  const auto it = cuda_executors().find(config.architecture);
  STRATA_CHECK(it != cuda_executors().end(), "no cuda executor for {}", config.architecture);
  STRATA_CUDA_CHECK(cudaSetDevice(options.gpu_id));
  return it->second(config, options);
}

}  // namespace strata
