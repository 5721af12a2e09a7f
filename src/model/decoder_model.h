#pragma once
// DecoderModel: the skeleton shared by every family: embedding -> the stage's decoder layers
// -> final norm -> LM head. Families supply the layers (and, where they differ, the names of
// the embedding / norm / head tensors and an embedding scale).
#include <functional>
#include <optional>
#include <vector>

#include "layers/linear.h"
#include "model/causal_lm.h"

namespace strata {

class DecoderLayer {
 public:
  virtual ~DecoderLayer() = default;
  // Updates the residual stream `hidden` [T, hidden_size] in place.
  virtual void forward(Tensor& hidden, const ForwardBatch& batch, ForwardContext& ctx) = 0;
  // The layer's KV-cache layout, if it has attention.
  virtual std::optional<KVLayerLayout> kv_layout() const { return std::nullopt; }
  // The layer's per-request recurrent state, if it has a recurrent mixer.
  virtual std::optional<RecurrentStateLayout> state_layout() const { return std::nullopt; }
};

struct DecoderNames {
  std::string embed = "model.embed_tokens.weight";
  std::string final_norm = "model.norm.weight";
  std::string lm_head = "lm_head";  // prefix of lm_head.weight
  float norm_weight_offset = 0.0f;  // 1 for Gemma-style (1 + w) norms
  float embed_scale = 1.0f;         // Gemma: sqrt(hidden); Falcon-H1: embedding multiplier
  float logits_scale = 1.0f;        // muP output multipliers
};

using LayerFactory = std::function<std::unique_ptr<DecoderLayer>(int layer_id)>;

class DecoderModel : public CausalLM {
 public:
  DecoderModel(const ModelConfig& config, ParamLoader& weights, StagePlan stage,
               const LayerFactory& make_layer, DecoderNames names = {});
  const ModelConfig& config() const override { return config_; }
  const StagePlan& stage() const override { return stage_; }
  std::map<int, KVLayerLayout> kv_layouts() const override;
  std::map<int, RecurrentStateLayout> state_layouts() const override;
  Tensor forward(const ForwardBatch& batch, ForwardContext& ctx, const Tensor& hidden_in) override;

 private:
  ModelConfig config_;
  StagePlan stage_;
  DecoderNames names_;
  Embedding embed_;
  std::vector<std::unique_ptr<DecoderLayer>> layers_;  // layers_[i] is global layer start + i
  RMSNorm final_norm_;
  Linear lm_head_;
};

}  // namespace strata
