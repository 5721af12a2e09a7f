// What runs on --device cuda, as data: the layer kinds the CUDA ops and backends implement.
// Every family is one model file for every device (models/*.cpp), so what decides is the
// layer list (layer_kinds.cpp), not the architecture name. Startup checks a configuration
// against these rows and reports every problem before any weight is read (DESIGN.md §1.4).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "dist/gpu_assignment.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model_runner.h"
#include "runtime/stage_device.h"

namespace strata {

namespace {

// The attention kernels' limit on a cached row's per-head width: what both decode and extend
// take (kernels/cuda/attention.h). MLA's latent row (576 for DeepSeek-V2/V3) is under it.
constexpr int kMaxCudaHeadWidth = cuda::kMaxAttentionHeadWidth;

// The width of a layer's cached key row per head, as its KV layout will report it.
int cached_head_width(const ModelConfig& c, AttentionKind kind) {
  if (kind == AttentionKind::MLA)
    return c.get_int("kv_lora_rank", 0) + c.get_int("qk_rope_head_dim", 0);
  return c.head_dim;
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
  for (int id : c.recurrent_layer_ids()) {
    const RecurrentKind kind = c.layers[id].recurrent;
    if (kind != RecurrentKind::Mamba2 && kind != RecurrentKind::ShortConv &&
        kind != RecurrentKind::GatedDeltaNet) {
      problems.push_back(fmt::format(
          "{} has {} layers (layer {}), which --device cuda does not run yet: use --device cpu",
          c.architecture, to_string(c.layers[id].recurrent), id));
      break;
    }
  }
  if (o.attention_backend != "auto" && o.attention_backend != "cuda")
    problems.push_back(
        fmt::format("--attention-backend '{}' is not available on cuda: use auto or cuda",
                    o.attention_backend));
  if (!(o.mem_fraction_static > 0.0 && o.mem_fraction_static <= 1.0))
    problems.push_back(
        fmt::format("--mem-fraction-static must be in (0, 1], got {}", o.mem_fraction_static));
  for (int id : c.attention_layer_ids()) {
    const int width = cached_head_width(c, c.layers[id].attention);
    if (width % 8 != 0 || width > kMaxCudaHeadWidth) {
      problems.push_back(fmt::format(
          "layer {} caches {}-wide heads ({} attention); the CUDA attention kernels take "
          "multiples of 8 up to {}: use --device cpu",
          id, width, to_string(c.layers[id].attention), kMaxCudaHeadWidth));
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

}  // namespace strata
