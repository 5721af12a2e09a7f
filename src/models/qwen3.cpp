// Qwen3 = Llama with an RMSNorm over every q and k head (before rope) and no q/k/v bias;
// head_dim is explicit and may exceed hidden_size / num_heads.
#include "models/llama.h"

namespace strata {

std::unique_ptr<CausalLM> build_qwen3(const ModelConfig& c, ParamLoader& w, const StagePlan& s) {
  return build_llama_family(c, w, s, LlamaVariant{.qkv_bias = false, .qk_norm = true});
}

}  // namespace strata
