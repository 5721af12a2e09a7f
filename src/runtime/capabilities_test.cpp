#include "runtime/capabilities.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"
#include "runtime/model_runner.h"
#include "test_util.h"

namespace strata {

namespace {

// The configuration error RunnerOptions::validate reports ("" when there is none).
std::string problems(const RunnerOptions& o, const ModelConfig& c) {
  try {
    o.validate(c);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

ModelConfig dense_config() {
  return ModelConfig::from_json(
      json::parse(
          R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 10,
        "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2})"),
      "config.json");
}

}  // namespace

TEST(Capabilities, MambaCacheStrategyIsCheckedAgainstTheTable) {
  const std::string f = "mamba_radix_cache_strategy";
  EXPECT_EQ(capability_values(f), (std::vector<std::string>{"no_buffer", "extra_buffer"}));
  // Hybrid models run on the CPU and CUDA backends, with either strategy; auto picks
  // no_buffer on both.
  for (const char* device : {"cpu", "cuda"}) {
    EXPECT_FALSE(check_capability(f, "auto", device));
    EXPECT_FALSE(check_capability(f, "no_buffer", device));
    EXPECT_FALSE(check_capability(f, "extra_buffer", device));
    EXPECT_EQ(resolve_capability(f, "auto", device), "no_buffer");
  }
  // A device no row lists is refused with the rows' devices named.
  const auto refused = check_capability(f, "extra_buffer", "tpu");
  ASSERT_TRUE(refused);
  for (const char* part :
       {"--mamba-radix-cache-strategy extra_buffer", "device tpu", "[cpu, cuda]"})
    EXPECT_NE(refused->find(part), std::string::npos) << *refused;
  const auto unknown = check_capability(f, "some_buffer", "cpu");
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->find("'some_buffer' is unknown"), std::string::npos) << *unknown;
  EXPECT_FALSE(check_capability_value(f, "auto"));
  EXPECT_FALSE(check_capability_value(f, "extra_buffer"));
  ASSERT_TRUE(check_capability_value(f, "some_buffer"));
  EXPECT_EQ(*check_capability_value(f, "some_buffer"), *unknown);
}

TEST(Capabilities, QuantizationIsCheckedAgainstTheTable) {
  EXPECT_EQ(capability_values("quantization"),
            (std::vector<std::string>{"none", "int8", "w8a8_int8"}));
  RunnerOptions o;
  EXPECT_EQ(problems(o, dense_config()), "");
  EXPECT_EQ(o.weight_dtype(), DType::F32);
  for (const char* name : {"int8", "w8a8_int8"}) {
    o.quantization = name;
    EXPECT_EQ(problems(o, dense_config()), "") << name;
    EXPECT_EQ(o.weight_dtype(), DType::Q8) << name;
  }
  // On cuda: refused, naming the flag, the device and where it runs.
  o.device = "cuda";
  std::string e = problems(o, dense_config());
  for (const char* part : {"--quantization w8a8_int8", "device cuda", "[cpu]", "none"})
    EXPECT_NE(e.find(part), std::string::npos) << e;
  // A value strata does not know lists the ones it does.
  o.device = "cpu";
  o.quantization = "fp8";
  e = problems(o, dense_config());
  for (const char* part : {"--quantization 'fp8' is unknown", "none, int8, w8a8_int8"})
    EXPECT_NE(e.find(part), std::string::npos) << e;
  // int8 and bf16 both say how the matrices are stored.
  o.quantization = "int8";
  o.dtype = "bfloat16";
  e = problems(o, dense_config());
  EXPECT_NE(e.find("--quantization int8 with --dtype bfloat16"), std::string::npos) << e;
}

TEST(Capabilities, RunnerOptionsValidateTheMambaFlagsBeforeLoading) {
  const ModelConfig hybrid = ModelConfig::load(test::fixture_dir("nemotron_h"));
  RunnerOptions o;
  o.mamba_radix_cache_strategy = "some_buffer";
  o.mamba_ssm_dtype = "int4";
  std::string e = problems(o, hybrid);
  EXPECT_NE(e.find("--mamba-radix-cache-strategy 'some_buffer' is unknown"), std::string::npos)
      << e;
  EXPECT_NE(e.find("--mamba-ssm-dtype 'int4'"), std::string::npos) << e;
  // A typo is refused for a dense model too; the rest of the Mamba flags do not concern it.
  EXPECT_NE(problems(o, dense_config()).find("'some_buffer' is unknown"), std::string::npos);

  o = RunnerOptions{};
  o.radix_cache = true;
  o.page_size = 16;
  o.mamba_radix_cache_strategy = "extra_buffer";
  o.mamba_track_interval = 100;
  e = problems(o, hybrid);
  EXPECT_NE(e.find("--mamba-track-interval 100 is not a multiple of --page-size 16"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("use 96 or 112"), std::string::npos) << e;
  EXPECT_EQ(problems(o, dense_config()), "");
  o.mamba_radix_cache_strategy = "no_buffer";  // no interval checkpoints: the interval is unused
  EXPECT_EQ(problems(o, hybrid), "");
  o.mamba_track_interval = 0;
  e = problems(o, hybrid);
  EXPECT_NE(e.find("--mamba-track-interval must be a positive multiple of --page-size (16), got 0"),
            std::string::npos)
      << e;
  o.mamba_track_interval = 32;
  o.mamba_radix_cache_strategy = "extra_buffer";
  EXPECT_EQ(problems(o, hybrid), "");

  o.device = "cuda";  // hybrids run on the CUDA backend, with either cache strategy
  e = problems(o, hybrid);
  EXPECT_EQ(e.find("extra_buffer is not available"), std::string::npos) << e;
  EXPECT_EQ(e.find("recurrent"), std::string::npos) << e;
}

}  // namespace strata
