#pragma once
// Architecture name (config.json "architectures"[0]) -> model builder. One line per family.
#include <memory>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/param_loader.h"

namespace strata {

// Fails, naming the supported architectures, when `config` is not one of them.
void validate_architecture(const ModelConfig& config);
std::vector<std::string> supported_architectures();
std::unique_ptr<CausalLM> build_model(const ModelConfig& config, ParamLoader& weights,
                                      const StagePlan& stage);

}  // namespace strata
