#include "random_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "models/registry.h"
#include "ops/ops.h"
#include "test_util.h"

namespace strata::test {

namespace fs = std::filesystem;

namespace {

// Records the name and shape of every tensor a model asks for.
class RecordingWeights : public WeightSource {
 public:
  bool has(const std::string&) const override { return true; }
  Tensor load(const std::string& name, const std::vector<int64_t>& shape) override {
    shapes[name] = shape;
    return Tensor(shape);
  }
  const TensorInfo* info(const std::string&) const override { return nullptr; }
  std::vector<std::string> unused() const override { return {}; }
  std::map<std::string, std::vector<int64_t>> shapes;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Random weights of realistic scale (unit-variance activations), so that every mixer moves the
// residual stream and a state handled wrongly shows in the logits.
Tensor random_weight(const std::string& name, const std::vector<int64_t>& shape,
                     std::mt19937& rng) {
  Tensor t(shape);
  auto fill = [&](auto dist) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(dist(rng));
  };
  if (ends_with(name, "A_log")) {
    fill(std::uniform_real_distribution<double>(0.0, std::log(8.0)));
  } else if (ends_with(name, ".D")) {
    fill(std::uniform_real_distribution<double>(0.5, 1.5));
  } else if (ends_with(name, "dt_bias")) {  // softplus^-1 of dt in [0.01, 0.3]
    std::uniform_real_distribution<double> dt(0.01, 0.3);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double d = dt(rng);
      t.data()[i] = static_cast<float>(d + std::log(-std::expm1(-d)));
    }
  } else if (ends_with(name, "norm.weight") || ends_with(name, "layernorm.weight")) {
    fill(std::normal_distribution<double>(1.0, 0.1));
  } else if (shape.size() == 1) {
    fill(std::normal_distribution<double>(0.0, 0.1));
  } else if (shape.size() == 3) {  // depthwise conv [channels, 1, kernel]
    fill(std::normal_distribution<double>(0.0, 0.5));
  } else {
    const double scale =
        (ends_with(name, "lm_head.weight") ? 4.0 : 1.0) / std::sqrt(double(shape[1]));
    fill(std::normal_distribution<double>(0.0,
                                          name.find("embed") != std::string::npos ? 1.0 : scale));
  }
  return t;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  json header = json::object();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const size_t bytes = t.numel() * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [_, t] : tensors)
    out.write(reinterpret_cast<const char*>(t.data()),
              static_cast<std::streamsize>(t.numel() * sizeof(float)));
}

}  // namespace

std::string make_model(const std::string& name, const json& config, uint32_t seed) {
  const fs::path dir = fs::path(scratch_dir()) / ("model_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  const ModelConfig c = ModelConfig::load(dir.string());
  RecordingWeights rec;
  const auto ops = make_cpu_ops();
  ParamLoader loader(rec, *ops, false, 0);
  build_model(c, loader, StagePlan::whole(c));
  std::mt19937 rng(seed);
  std::map<std::string, Tensor> tensors;
  for (const auto& [tensor, shape] : rec.shapes)
    tensors[tensor] = random_weight(tensor, shape, rng);
  write_safetensors((dir / "model.safetensors").string(), tensors);
  return dir.string();
}

}  // namespace strata::test
