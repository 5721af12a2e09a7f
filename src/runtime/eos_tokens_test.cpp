#include "runtime/eos_tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace strata {

namespace fs = std::filesystem;

TEST(EosTokens, TheSetJoinsConfigGenerationConfigAndTheTokenizer) {
  const fs::path dir = fs::path(test::scratch_dir()) / "eos_model";
  fs::create_directories(dir);
  fs::copy_file(test::fixture_dir("llama") + "/config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);  // eos_token_id 2, vocabulary 512
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [2, 5]})";
  const ModelConfig config = ModelConfig::load(dir.string());
  EXPECT_EQ(model_eos_token_ids(config, std::nullopt), (std::vector<int>{2, 5}));
  EXPECT_EQ(model_eos_token_ids(config, 7), (std::vector<int>{2, 5, 7}));
  EXPECT_EQ(model_eos_token_ids(config, 5), (std::vector<int>{2, 5}));
  // A tokenizer of another model may name an id this one does not have.
  EXPECT_EQ(model_eos_token_ids(config, 600), (std::vector<int>{2, 5}));
}

// `generate --stop-at-eos` stops where `serve` does: at an EOS id that only
// generation_config.json names (generate used to read config.json's alone).
TEST(EosTokens, GenerateStopsAtTheGenerationConfigsEos) {
  const auto ref = test::load_reference("llama");
  // A prompt and a greedy token that does not occur before its position (> 0), as EOS.
  size_t prompt_index = 0, stop_at = 0;
  for (size_t p = 0; p < ref.greedy_ids.size() && stop_at == 0; ++p)
    for (size_t k = 1; k < ref.greedy_ids[p].size() && stop_at == 0; ++k) {
      const auto& g = ref.greedy_ids[p];
      if (g[k] != 2 &&
          std::find(g.begin(), g.begin() + k, g[k]) == g.begin() + k) {  // 2: config.json's
        prompt_index = p;
        stop_at = k;
      }
    }
  ASSERT_GT(stop_at, 0u) << "the reference has no usable greedy token";
  const std::vector<int>& prompt = ref.input_ids[prompt_index];
  const std::vector<int>& greedy = ref.greedy_ids[prompt_index];
  const fs::path dir = fs::path(test::scratch_dir()) / "eos_generate";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(test::fixture_dir("llama") + "/" + f, dir / f,
                  fs::copy_options::overwrite_existing);
  std::ofstream(dir / "generation_config.json") << "{\"eos_token_id\": " << greedy[stop_at] << "}";
  std::string ids;
  for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
  std::string out, err;
  ASSERT_EQ(test::run_strata("generate --model " + dir.string() + " --input-ids " + ids +
                                 " --max-new-tokens 10 --stop-at-eos --json",
                             &out, &err),
            0)
      << err;
  const json j = json::parse(out);
  EXPECT_EQ(j["output_ids"].get<std::vector<int>>(),
            std::vector<int>(greedy.begin(), greedy.begin() + stop_at + 1));
  EXPECT_EQ(j["finish_reason"], "stop");
}

}  // namespace strata
