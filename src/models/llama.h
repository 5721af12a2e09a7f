#pragma once
// The Llama family: pre-norm decoder layers of GQA attention and a SwiGLU MLP.
// Qwen2, Qwen3 and Mistral are this model with one difference each (see their files).
#include <memory>

#include "model/causal_lm.h"
#include "model/param_loader.h"

namespace strata {

struct LlamaVariant {
  bool qkv_bias = false;  // Qwen2: biases on q, k, v
  bool qk_norm = false;   // Qwen3: RMSNorm over each q and k head before rope
};

std::unique_ptr<CausalLM> build_llama_family(const ModelConfig& config, ParamLoader& weights,
                                             const StagePlan& stage, const LlamaVariant& variant);

}  // namespace strata
