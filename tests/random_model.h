#pragma once
// Tiny models with random weights of realistic scale, generated from a config alone: the
// layout tests' patterns (hybrid_layout_test.cpp) and shapes no fixture has (tp_test.cpp: a
// vocabulary that does not split evenly).
#include <cstdint>
#include <string>

#include "model/json_util.h"

namespace strata::test {

// A model directory in the scratch directory holding `config` and random weights (seeded by
// `seed`) for exactly the tensors the model loads.
std::string make_model(const std::string& name, const json& config, uint32_t seed);

}  // namespace strata::test
