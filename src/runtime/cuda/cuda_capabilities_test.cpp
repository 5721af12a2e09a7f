// The capability rows' head-width limit against real configurations: DeepSeek-V2-Lite's
// 576-wide MLA latent (bench/configs/deepseek-v2-lite-chat) is within what the CUDA attention
// kernels take, a wider latent is still refused with the width in the message. Needs no GPU:
// the width check comes before the device check, and without a device the only problem left
// is the missing device.
#include <gtest/gtest.h>

#include <fstream>

#include "kernels/cuda/attention.h"
#include "model/config.h"
#include "runtime/model_runner.h"
#include "runtime/stage_device.h"

namespace strata {
namespace {

json deepseek_v2_lite() {
  const std::string path =
      std::string(STRATA_TEST_DATA) + "/../../bench/configs/deepseek-v2-lite-chat/config.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::string width_problem(const ModelConfig& c) {
  RunnerOptions o;
  o.device = "cuda";
  for (const auto& p : cuda_configuration_problems(c, o))
    if (p.find("-wide heads") != std::string::npos) return p;
  return "";
}

// Every recurrent layer kind the fixtures have runs on cuda: Qwen3-Next's Gated DeltaNet and
// LFM2's short conv get no problem of their own (without a GPU the only one left is the
// missing device).
TEST(CudaCapabilities, GatedDeltaNetAndShortConvRunOnCuda) {
  RunnerOptions o;
  o.device = "cuda";
  const auto problems = [&](const std::string& fixture) {
    std::string all;
    for (const auto& p : cuda_configuration_problems(
             ModelConfig::load(std::string(STRATA_MODEL_DATA) + "/" + fixture), o))
      all += p + "\n";
    return all;
  };
  for (const std::string fixture : {"qwen3_next", "lfm2"}) {
    EXPECT_EQ(problems(fixture).find("layers (layer"), std::string::npos) << problems(fixture);
    EXPECT_EQ(problems(fixture).find("does not run"), std::string::npos) << problems(fixture);
  }
}

TEST(CudaCapabilities, DeepSeekV2LiteLatentFitsTheKernels) {
  const ModelConfig c = ModelConfig::from_json(deepseek_v2_lite(), "config.json");
  ASSERT_EQ(c.get_int("kv_lora_rank", 0) + c.get_int("qk_rope_head_dim", 0), 576);
  EXPECT_GE(cuda::kMaxAttentionHeadWidth, 576);
  EXPECT_EQ(width_problem(c), "");
}

TEST(CudaCapabilities, TooWideALatentIsRefused) {
  json j = deepseek_v2_lite();
  j["kv_lora_rank"] = cuda::kMaxAttentionHeadWidth;  // + 64 rope: past the limit
  const std::string p = width_problem(ModelConfig::from_json(j, "config.json"));
  EXPECT_NE(p.find(std::to_string(cuda::kMaxAttentionHeadWidth + 64) + "-wide"), std::string::npos)
      << p;
}

}  // namespace
}  // namespace strata
