#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/dummy_random.h"
#include "core/error.h"
#include "model/json_util.h"

namespace strata {

namespace fs = std::filesystem;

namespace {

void check_finite(const std::string& name, const std::string& file, const Tensor& t) {
  // One pass over values the load touches anyway: a NaN or Inf weight would otherwise only
  // show as NaN logits (printed as null) and token 0.
  const float* v = t.data();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      fail(
          "tensor '{}' in {} holds {} at element {}: the checkpoint is corrupt; re-download or "
          "re-save it",
          name, file, v[i], i);
}

}  // namespace

LoadFormat parse_load_format(const std::string& s) {
  if (s == "auto") return LoadFormat::Auto;
  if (s == "safetensors") return LoadFormat::Safetensors;
  if (s == "dummy") return LoadFormat::Dummy;
  fail("unknown --load-format '{}': use auto, safetensors or dummy", s);
}

std::unique_ptr<WeightSource> open_weights(const std::string& model_dir, LoadFormat format,
                                           uint64_t seed) {
  if (format == LoadFormat::Dummy) return std::make_unique<DummyWeights>(seed);
  return std::make_unique<CheckpointWeights>(model_dir);
}

Tensor DummyWeights::load(const std::string& name, const std::vector<int64_t>& shape) {
  Tensor t(shape);
  const auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("norm.weight") || ends_with("layernorm.weight")) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = 1.0f;
  } else if (!ends_with(".bias")) {
    // The expression every device's Ops::fill_dummy computes (core/dummy_random.h).
    const uint64_t stream = dummy_stream(seed_, name);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dummy_value(stream, i, 0.02f);
  }
  return t;
}

CheckpointWeights::CheckpointWeights(const std::string& model_dir) : model_dir_(model_dir) {
  const fs::path dir(model_dir);
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  if (fs::exists(index_path)) {
    const json index = read_json_file(index_path.string());
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{} has no 'weight_map' object: the sharded checkpoint index is broken",
           index_path.string());
    std::set<std::string> unique;
    for (auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string())
        fail("{}: weight_map entry for '{}' is not a file name", index_path.string(), tensor);
      // Shards live in the model directory: an absolute path or a '..' step would read files
      // the directory does not hold.
      const fs::path shard(file.get<std::string>());
      const bool escapes =
          shard.is_absolute() || std::any_of(shard.begin(), shard.end(),
                                             [](const fs::path& part) { return part == ".."; });
      if (escapes || shard.empty())
        fail(
            "{}: weight_map entry for '{}' names shard '{}', which is outside the model "
            "directory; shards must be file names inside {}",
            index_path.string(), tensor, shard.string(), model_dir);
      unique.insert(file.get<std::string>());
    }
    shard_names.assign(unique.begin(), unique.end());
  } else if (fs::exists(dir / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    fail(
        "'{}' holds no weights: expected model.safetensors or model.safetensors.index.json "
        "(or pass --load-format dummy for random weights)",
        model_dir);
  }
  for (const auto& shard : shard_names) {
    const fs::path p = dir / shard;
    if (!fs::exists(p))
      fail("checkpoint shard {} listed in the index is missing from {}", shard, model_dir);
    files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
    for (const auto& [name, info] : files_.back()->tensors()) {
      if (index_.count(name)) fail("tensor '{}' appears in two checkpoint shards", name);
      index_[name] = {&info, files_.back().get()};
    }
  }
}

bool CheckpointWeights::has(const std::string& name) const {
  return index_.count(name) > 0;
}

const TensorInfo* CheckpointWeights::info(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.first;
}

Tensor CheckpointWeights::load(const std::string& name, const std::vector<int64_t>& expected) {
  auto it = index_.find(name);
  if (it == index_.end())
    fail(
        "checkpoint in {} is missing tensor '{}' (expected shape {}): the checkpoint does not "
        "match its config.json",
        model_dir_, name, shape_to_string(expected));
  const TensorInfo& info = *it->second.first;
  if (info.shape != expected)
    fail(
        "tensor '{}' in {} has shape {} but the config implies {}: the checkpoint does not match "
        "its config.json",
        name, info.file, shape_to_string(info.shape), shape_to_string(expected));
  if (info.dtype != DType::F32 && info.dtype != DType::BF16 && info.dtype != DType::F16)
    fail("tensor '{}' in {} has dtype {}; strata loads F32, BF16 and F16 weights", name, info.file,
         dtype_name(info.dtype));
  used_.insert(name);
  Tensor t;
  if (info.dtype == DType::F32 && reinterpret_cast<uintptr_t>(info.data) % alignof(float) == 0) {
    // Zero-copy view into the read-only mapping; models never write their weights.
    t = Tensor::view(const_cast<float*>(reinterpret_cast<const float*>(info.data)), expected,
                     it->second.second->mapping());
  } else {
    t = Tensor(expected);
    convert_to_f32(info.dtype, info.data, t.data(), static_cast<size_t>(info.numel()));
  }
  check_finite(name, info.file, t);
  return t;
}

std::vector<std::string> CheckpointWeights::unused() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : index_)
    if (!used_.count(name)) out.push_back(name);
  return out;
}

int64_t CheckpointWeights::total_elements() const {
  int64_t total = 0;
  for (const auto& [name, entry] : index_) total += entry.first->numel();
  return total;
}

}  // namespace strata
