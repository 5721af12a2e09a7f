#pragma once
// The tokenizer fixtures (unpacked from tests/data/tokenizers.tar.xz at configure time), each
// loaded once per test binary.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace strata::test {

inline const std::vector<std::string> kTokenizerFixtures = {"qwen3", "llama3", "deepseek_v3",
                                                            "gptoss", "llama2"};

inline std::string tokenizer_fixture_dir(const std::string& name) {
  return std::string(STRATA_TOKENIZER_DATA) + "/" + name;
}

const tok::Tokenizer& fixture_tokenizer(const std::string& name);
nlohmann::json fixture_json(const std::string& name, const std::string& file);

}  // namespace strata::test
