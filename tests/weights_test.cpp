// Checkpoint layouts: a sharded checkpoint (model.safetensors.index.json) and f16 weights load
// and give the single-file model's results; a broken index is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/json_util.h"
#include "model/safetensors.h"
#include "test_util.h"

namespace strata::test {

namespace fs = std::filesystem;

namespace {

uint16_t to_f16(float f) {
  // Round-to-nearest-even via the hardware-free route: scale into the f16 grid.
  if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + 15;
  if (exp <= 0) return sign | static_cast<uint16_t>(std::nearbyint(a / std::ldexp(1.0f, -24)));
  uint32_t mant =
      static_cast<uint32_t>(std::nearbyint((a / std::ldexp(1.0f, e - 1) - 1.0f) * 1024));
  if (mant == 1024) mant = 0, ++exp;
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(mant);
}

void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, const TensorInfo*>>& tensors,
                       bool as_f16) {
  json header = json::object();
  std::string data;
  for (const auto& [name, info] : tensors) {
    std::string bytes(reinterpret_cast<const char*>(info->data), info->nbytes);
    std::string dtype = dtype_name(info->dtype);
    if (as_f16 && info->dtype == DType::F32) {
      std::string half(info->numel() * 2, '\0');
      for (int64_t i = 0; i < info->numel(); ++i) {
        float f;
        std::memcpy(&f, bytes.data() + 4 * i, 4);
        const uint16_t h = to_f16(f);
        std::memcpy(half.data() + 2 * i, &h, 2);
      }
      bytes = half;
      dtype = "F16";
    }
    header[name] = {{"dtype", dtype},
                    {"shape", info->shape},
                    {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << data;
}

// Splits the llama fixture into two shards (the second optionally in f16) plus an index.
fs::path make_sharded_copy(const std::string& tag, bool second_f16) {
  const fs::path dir =
      fs::temp_directory_path() / ("strata_sharded_" + tag + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fixture_dir("llama") + "/config.json", dir / "config.json");
  SafetensorsFile src(fixture_dir("llama") + "/model.safetensors");
  std::vector<std::pair<std::string, const TensorInfo*>> a, b;
  json weight_map = json::object();
  for (const auto& [name, info] : src.tensors()) {
    const bool first = name.find("layers.0.") != std::string::npos ||
                       name.find("layers.1.") != std::string::npos ||
                       name.find("embed") != std::string::npos;
    (first ? a : b).push_back({name, &info});
    weight_map[name] =
        first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir / "model-00001-of-00002.safetensors", a, false);
  write_safetensors(dir / "model-00002-of-00002.safetensors", b, second_f16);
  std::ofstream(dir / "model.safetensors.index.json")
      << json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump();
  return dir;
}

}  // namespace

TEST(Weights, ShardedCheckpointEqualsSingleFile) {
  const fs::path dir = make_sharded_copy("f32", false);
  const auto ref = load_reference("llama");
  ModelRunner single(ModelConfig::load(fixture_dir("llama")), default_options());
  ModelRunner sharded(ModelConfig::load(dir.string()), default_options());
  const Tensor a = prefill_all_logits(single, ref.input_ids[2]);
  const Tensor b = prefill_all_logits(sharded, ref.input_ids[2]);
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
  fs::remove_all(dir);
}

TEST(Weights, F16CheckpointIsCloseToF32) {
  const fs::path dir = make_sharded_copy("f16", true);
  const auto ref = load_reference("llama");
  ModelRunner half(ModelConfig::load(dir.string()), default_options());
  const Tensor logits = prefill_all_logits(half, ref.input_ids[2]);
  // f16 keeps 11 significant bits: weights move by ~2.4e-4 relative.
  EXPECT_LE(max_abs_diff(logits, ref.logits[2]), 2e-2);
  EXPECT_GT(max_abs_diff(logits, ref.logits[2]), 0.0);  // it really was converted
  fs::remove_all(dir);
}

TEST(Weights, IndexNamingAMissingShardIsAClearError) {
  const fs::path dir = make_sharded_copy("missing", false);
  fs::remove(dir / "model-00002-of-00002.safetensors");
  try {
    ModelRunner runner(ModelConfig::load(dir.string()), default_options());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Weights, DummyWeightsNeedOnlyAConfig) {
  RunnerOptions o = default_options();
  o.load_format = LoadFormat::Dummy;
  ModelRunner runner(ModelConfig::load(fixture_dir("qwen3")), o);
  const auto out = greedy(runner, {{1, 2, 3}}, 4, false);
  EXPECT_EQ(out[0].output_ids.size(), 4u);
}

}  // namespace strata::test
