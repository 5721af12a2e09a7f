#include "models/registry.h"

#include <fmt/ranges.h>

#include <functional>
#include <map>

#include "core/error.h"
#include "models/llama.h"

namespace strata {

std::unique_ptr<CausalLM> build_qwen2(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_qwen3(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_mistral(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_nemotron_h(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_bamba(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_falcon_h1(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_deepseek(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_gemma3(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_gpt_oss(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_lfm2(const ModelConfig&, ParamLoader&, const StagePlan&);
std::unique_ptr<CausalLM> build_qwen3_next(const ModelConfig&, ParamLoader&, const StagePlan&);

namespace {

using Builder =
    std::function<std::unique_ptr<CausalLM>(const ModelConfig&, ParamLoader&, const StagePlan&)>;

const std::map<std::string, Builder>& builders() {
  static const std::map<std::string, Builder> kBuilders = {
      {"LlamaForCausalLM",
       [](const ModelConfig& c, ParamLoader& w, const StagePlan& s) {
         return build_llama_family(c, w, s, LlamaVariant{});
       }},
      {"Qwen2ForCausalLM", build_qwen2},
      {"Qwen3ForCausalLM", build_qwen3},
      {"MistralForCausalLM", build_mistral},
      {"NemotronHForCausalLM", build_nemotron_h},
      {"BambaForCausalLM", build_bamba},
      {"FalconH1ForCausalLM", build_falcon_h1},
      {"DeepseekV2ForCausalLM", build_deepseek},
      {"DeepseekV3ForCausalLM", build_deepseek},
      {"Gemma3ForCausalLM", build_gemma3},
      {"GptOssForCausalLM", build_gpt_oss},
      {"Lfm2ForCausalLM", build_lfm2},
      {"Qwen3NextForCausalLM", build_qwen3_next},
  };
  return kBuilders;
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, _] : builders()) names.push_back(name);
  return names;
}

void validate_architecture(const ModelConfig& config) {
  if (!builders().count(config.architecture))
    fail("unknown architecture '{}' in {}/config.json: strata supports {}", config.architecture,
         config.model_dir.empty() ? "." : config.model_dir,
         fmt::join(supported_architectures(), ", "));
}

std::unique_ptr<CausalLM> build_model(const ModelConfig& config, ParamLoader& weights,
                                      const StagePlan& stage) {
  validate_architecture(config);
  return builders().at(config.architecture)(config, weights, stage);
}

}  // namespace strata
