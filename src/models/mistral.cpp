// Mistral = Llama whose attention sees only the last `sliding_window` positions. The window
// is a property of each layer (LayerSpec), set by layer classification; the attention
// backend applies it.
#include "models/llama.h"

namespace strata {

std::unique_ptr<CausalLM> build_mistral(const ModelConfig& c, ParamLoader& w, const StagePlan& s) {
  return build_llama_family(c, w, s, LlamaVariant{});
}

}  // namespace strata
