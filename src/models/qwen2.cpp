// Qwen2 = Llama with biases on the q, k and v projections (and usually tied embeddings,
// which config.json's tie_word_embeddings already says).
#include "models/llama.h"

namespace strata {

std::unique_ptr<CausalLM> build_qwen2(const ModelConfig& c, ParamLoader& w, const StagePlan& s) {
  return build_llama_family(c, w, s, LlamaVariant{.qkv_bias = true, .qk_norm = false});
}

}  // namespace strata
