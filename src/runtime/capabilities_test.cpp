#include "runtime/capabilities.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"
#include "runtime/model_runner.h"

namespace strata {

TEST(Capabilities, MambaCacheStrategyIsCheckedAgainstTheTable) {
  const std::string f = "mamba_radix_cache_strategy";
  EXPECT_EQ(capability_values(f), (std::vector<std::string>{"extra_buffer", "no_buffer"}));
  EXPECT_FALSE(check_capability(f, "auto", "cpu"));
  EXPECT_FALSE(check_capability(f, "no_buffer", "cpu"));
  EXPECT_FALSE(check_capability(f, "extra_buffer", "cuda"));
  EXPECT_EQ(resolve_capability(f, "auto", "cpu"), "no_buffer");
  EXPECT_EQ(resolve_capability(f, "auto", "cuda"), "extra_buffer");
  const auto refused = check_capability(f, "extra_buffer", "cpu");
  ASSERT_TRUE(refused);
  for (const char* part : {"--mamba-radix-cache-strategy extra_buffer", "device cpu", "no_buffer"})
    EXPECT_NE(refused->find(part), std::string::npos) << *refused;
  const auto unknown = check_capability(f, "some_buffer", "cpu");
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->find("'some_buffer' is unknown"), std::string::npos) << *unknown;
}

TEST(Capabilities, RunnerOptionsValidateTheStrategyBeforeLoading) {
  const ModelConfig c = ModelConfig::from_json(
      json::parse(
          R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 10,
        "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2})"),
      "config.json");
  RunnerOptions o;
  o.mamba_radix_cache_strategy = "extra_buffer";
  o.mamba_ssm_dtype = "int4";
  try {
    o.validate(c);
    FAIL() << "extra_buffer on cpu and an int4 SSM state must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extra_buffer is not available on device cpu"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--mamba-ssm-dtype 'int4'"), std::string::npos)
        << e.what();
  }
}

}  // namespace strata
