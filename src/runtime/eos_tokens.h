#pragma once
// The EOS set of a model, one definition for every command (generate, serve, perplexity), so
// that the same request stops at the same token on every path: config.json's eos_token_id,
// generation_config.json's (each an id or a list), and the tokenizer's EOS token
// (tokenizer_config.json's eos_token) when it is an id of the model.
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace strata {

// tokenizer_config.json's eos_token in `tokenizer_dir` (a string or {"content": ...}), as an id
// of `tokenizer`; nullopt when there is none or the vocabulary lacks it.
std::optional<int> tokenizer_eos_token_id(const tok::Tokenizer& tokenizer,
                                          const std::string& tokenizer_dir);

// The union, without repeats, in the order above.
std::vector<int> model_eos_token_ids(const ModelConfig& config, std::optional<int> tokenizer_eos);

}  // namespace strata
