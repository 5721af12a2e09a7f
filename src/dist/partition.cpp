#include "dist/partition.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "core/error.h"

namespace strata {

std::vector<int> parse_layer_partition(const std::string& text) {
  std::vector<int> counts;
  size_t begin = 0;
  for (;;) {
    const size_t end = text.find(',', begin);
    const std::string item =
        text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1 || value > (1 << 20))
      fail(
          "--pp-layer-partition '{}': entry {} ('{}') is not a positive layer count; give one "
          "count per stage, like 2,3,3",
          text, counts.size(), item);
    counts.push_back(static_cast<int>(value));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return counts;
}

std::vector<StagePlan> partition_layers(int num_layers, int pp_size,
                                        const std::vector<int>& layers_per_stage) {
  if (pp_size < 1) fail("--pp-size must be at least 1, got {}", pp_size);
  if (num_layers < 1) fail("the model has no decoder layers to split into pipeline stages");
  std::vector<int> counts = layers_per_stage;
  if (counts.empty()) {
    if (pp_size > num_layers)
      fail(
          "--pp-size {} is larger than the model's {} decoder layers: every stage needs at least "
          "one layer; use --pp-size {} or less",
          pp_size, num_layers, num_layers);
    counts.assign(pp_size, num_layers / pp_size);
    for (int i = 0; i < num_layers % pp_size; ++i) ++counts[pp_size - 1 - i];
  } else {
    if (static_cast<int>(counts.size()) != pp_size)
      fail(
          "--pp-layer-partition {} has {} entries but --pp-size is {}: give one layer count per "
          "stage",
          fmt::join(counts, ","), counts.size(), pp_size);
    for (size_t i = 0; i < counts.size(); ++i)
      if (counts[i] < 1)
        fail("--pp-layer-partition {}: stage {} gets {} layers; every stage needs at least one",
             fmt::join(counts, ","), i, counts[i]);
    const int total = std::accumulate(counts.begin(), counts.end(), 0);
    if (total != num_layers)
      fail(
          "--pp-layer-partition {} covers {} layers but the model has {} decoder layers; the "
          "counts must sum to {}",
          fmt::join(counts, ","), total, num_layers, num_layers);
  }
  std::vector<StagePlan> stages;
  int start = 0;
  for (int k = 0; k < pp_size; ++k) {
    stages.push_back(StagePlan{start, start + counts[k], k == 0, k == pp_size - 1});
    start += counts[k];
  }
  return stages;
}

std::string describe_partition(const std::vector<StagePlan>& stages) {
  std::string out;
  for (const auto& s : stages)
    out += fmt::format("{}[{}, {})", out.empty() ? "" : " ", s.start_layer, s.end_layer);
  return out;
}

}  // namespace strata
