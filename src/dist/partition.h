#pragma once
// How a model's decoder layers split into pipeline stages: the one place that decides which
// stage owns which layers (DESIGN.md §2). Stage k owns [start_k, end_k); stages are
// contiguous, non-empty and cover every layer exactly once.
#include <string>
#include <vector>

#include "model/causal_lm.h"

namespace strata {

// "a,b,c" -> {a, b, c}: layers per stage, as given to --pp-layer-partition. Throws Error
// naming the bad entry.
std::vector<int> parse_layer_partition(const std::string& text);

// The stages of a `num_layers`-layer model split `pp_size` ways. Without `layers_per_stage`:
// an even split with the remainder going one layer each to the LAST stages (SGLang's
// get_pp_indices: 10 layers over 4 stages -> 2,2,3,3). With it: exactly those counts, which
// must be `pp_size` positive entries summing to `num_layers`. Every mismatch is one Error
// naming the flag to change.
std::vector<StagePlan> partition_layers(int num_layers, int pp_size,
                                        const std::vector<int>& layers_per_stage = {});

// "[0, 2) [2, 4)": for logs and error messages.
std::string describe_partition(const std::vector<StagePlan>& stages);

}  // namespace strata
