#include "runtime/capabilities.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace strata {

namespace {

bool supports(const CapabilityRow& row, const std::string& device) {
  return std::find(row.devices.begin(), row.devices.end(), device) != row.devices.end();
}

std::vector<const CapabilityRow*> rows_of(const std::string& feature) {
  std::vector<const CapabilityRow*> out;
  for (const auto& row : capability_table())
    if (row.feature == feature) out.push_back(&row);
  return out;
}

}  // namespace

const std::vector<CapabilityRow>& capability_table() {
  // Recurrent-state prefix caching (src/runtime/scheduler.cpp, src/cache/radix_cache.cpp).
  // The snapshots are StatePool::copy between slots, queued on the device that holds the
  // pool, so both strategies run wherever the recurrent ops do. no_buffer comes first: `auto`
  // picks it, as SGLang does.
  static const std::vector<CapabilityRow> kTable = {
      // Weight quantization at load (RunnerOptions::weight_dtype, CpuOps' DType::Q8 and
      // kernels/cpu/gemm_int8.cpp). `none` first: auto picks it. w8a8_int8 is SGLang's name
      // for int8 weights with activations quantized on the fly (its scales are per channel and
      // per token; strata's are per row and 64 columns, computed here at load).
      {"quantization", "--quantization", "none", {"cpu", "cuda"}, "weights as --dtype keeps them"},
      {"quantization",
       "--quantization",
       "int8",
       {"cpu"},
       "int8 weights with a scale per 64 columns and the CPU's VNNI / AVX2 int8 kernels"},
      {"quantization",
       "--quantization",
       "w8a8_int8",
       {"cpu"},
       "int8 weights with a scale per 64 columns and the CPU's VNNI / AVX2 int8 kernels"},
      {"mamba_radix_cache_strategy",
       "--mamba-radix-cache-strategy",
       "no_buffer",
       {"cpu", "cuda"},
       "state snapshots where prompts and requests end, copied between state-pool slots"},
      {"mamba_radix_cache_strategy",
       "--mamba-radix-cache-strategy",
       "extra_buffer",
       {"cpu", "cuda"},
       "state snapshots every --mamba-track-interval prompt tokens besides no_buffer's, where "
       "the scheduler cuts prefill chunks, copied between state-pool slots"},
      // Grammar masks computed while the forward runs (Scheduler with a MaskWorker; the draw
      // queued after the pass, outside its captured graph on CUDA). On cuda verified by
      // StructuredOutput.CudaOverlappedMasksDrawWhatSequentialMasksDraw on the H200 (2026-12-02).
      {"grammar_mask_overlap",
       "--disable-overlap-grammar-masks",
       "overlap",
       {"cpu", "cuda"},
       "grammar masks computed on a worker thread while the forward pass runs"},
      // Sliding-window layers in TokenMemory's window space (RunnerOptions::window_space); the
      // CUDA attention backend mirrors the window table.
      {"kv_window_space",
       "--disable-hybrid-swa-memory",
       "window",
       {"cpu", "cuda"},
       "sliding-window layers keep only the positions their window sees, in a second slot "
       "space"},
  };
  return kTable;
}

std::vector<std::string> capability_values(const std::string& feature) {
  std::vector<std::string> out;
  for (const auto* row : rows_of(feature)) out.push_back(row->value);
  return out;
}

std::string resolve_capability(const std::string& feature, const std::string& value,
                               const std::string& device) {
  if (value != "auto") return value;
  for (const auto* row : rows_of(feature))
    if (supports(*row, device)) return row->value;
  return value;
}

std::optional<std::string> check_capability_value(const std::string& feature,
                                                  const std::string& value) {
  const auto rows = rows_of(feature);
  if (rows.empty()) return fmt::format("unknown feature '{}' (a bug in strata)", feature);
  const auto values = capability_values(feature);
  if (value == "auto" || std::find(values.begin(), values.end(), value) != values.end())
    return std::nullopt;
  return fmt::format("{} '{}' is unknown: use auto, {}", rows.front()->flag, value,
                     fmt::join(values, ", "));
}

std::optional<std::string> check_capability(const std::string& feature, const std::string& value,
                                            const std::string& device) {
  const auto rows = rows_of(feature);
  if (rows.empty()) return fmt::format("unknown feature '{}' (a bug in strata)", feature);
  const std::string& flag = rows.front()->flag;
  std::vector<std::string> here;  // settings that do run on this device
  for (const auto* row : rows)
    if (supports(*row, device)) here.push_back(row->value);
  if (value == "auto") {
    if (!here.empty()) return std::nullopt;
    return fmt::format("{} auto: no setting of it runs on device {}", flag, device);
  }
  auto it = std::find_if(rows.begin(), rows.end(),
                         [&](const CapabilityRow* r) { return r->value == value; });
  if (it == rows.end())
    return fmt::format("{} '{}' is unknown: use auto, {}", flag, value,
                       fmt::join(capability_values(feature), ", "));
  if (supports(**it, device)) return std::nullopt;
  return fmt::format(
      "{} {} is not available on device {}: it needs {}, which runs on [{}]; on {} use {} {}", flag,
      value, device, (*it)->why, fmt::join((*it)->devices, ", "), device, flag,
      here.empty() ? std::string("(none available)")
                   : fmt::format("{}", fmt::join(here, " or ")) + " (or auto)");
}

}  // namespace strata
