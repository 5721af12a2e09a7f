#pragma once
// Where a model's parameters come from: a Hugging Face checkpoint (one safetensors file or a
// sharded set listed in model.safetensors.index.json) or, with --load-format dummy, random
// values made from the config alone. Models ask by name and expected shape; a missing
// tensor or a shape mismatch is an error that names the tensor, the file and the fix.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/safetensors.h"

namespace strata {

enum class LoadFormat { Auto, Safetensors, Dummy };
LoadFormat parse_load_format(const std::string& s);

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // The tensor as f32 (converted from bf16/f16; f32 data is viewed in place when aligned).
  virtual Tensor load(const std::string& name, const std::vector<int64_t>& expected_shape) = 0;
  // The raw checkpoint entry (dtype, bytes), for backends that keep the stored dtype.
  virtual const TensorInfo* info(const std::string& name) const = 0;
  // Names of tensors present but never asked for (reported once loading finishes).
  virtual std::vector<std::string> unused() const = 0;
  // The parameters the source holds, for a load's progress; 0 when unknown (dummy weights are
  // made as the model asks for them).
  virtual int64_t total_elements() const { return 0; }
};

std::unique_ptr<WeightSource> open_weights(const std::string& model_dir, LoadFormat format,
                                           uint64_t seed = 0);

// Random weights: uniform with std 0.02 for matrices, 1 for norm weights, 0 for biases;
// deterministic in (seed, name, index) and the same on every device (core/dummy_random.h).
class DummyWeights : public WeightSource {
 public:
  explicit DummyWeights(uint64_t seed) : seed_(seed) {}
  bool has(const std::string&) const override { return true; }
  Tensor load(const std::string& name, const std::vector<int64_t>& shape) override;
  const TensorInfo* info(const std::string&) const override { return nullptr; }
  std::vector<std::string> unused() const override { return {}; }

 private:
  uint64_t seed_;
};

class CheckpointWeights : public WeightSource {
 public:
  explicit CheckpointWeights(const std::string& model_dir);
  bool has(const std::string& name) const override;
  Tensor load(const std::string& name, const std::vector<int64_t>& expected_shape) override;
  const TensorInfo* info(const std::string& name) const override;
  std::vector<std::string> unused() const override;
  int64_t total_elements() const override;

 private:
  std::string model_dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const TensorInfo*, const SafetensorsFile*>> index_;
  std::set<std::string> used_;
};

}  // namespace strata
