#pragma once
// Rotary position embeddings. The frequencies come from the config's rope settings
// (default, linear, llama3, yarn); rotation is NeoX-style (halves) or GPT-J-style
// (interleaved pairs), and may cover only the first `rotary_dim` columns of a head.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/param_loader.h"
#include "ops/ops.h"

namespace strata {

class RotaryEmbedding {
 public:
  RotaryEmbedding() = default;
  RotaryEmbedding(const RopeConfig& rope, int rotary_dim, bool interleaved = false);

  // Rotates `num_heads` heads of each token in place. Head h of token t starts at
  // x + t * row_stride + h * head_stride.
  void apply(float* x, int64_t num_tokens, int num_heads, int64_t row_stride, int64_t head_stride,
             const int32_t* positions) const;

  // The frequency table on the stage's device, for Ops::rope.
  RopeTable table(ParamLoader& w) const;

  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // Multiplier folded into cos/sin (YaRN's attention factor; 1 otherwise).
  float cos_sin_scale() const { return cos_sin_scale_; }
  int rotary_dim() const { return rotary_dim_; }

 private:
  std::vector<float> inv_freq_;
  int rotary_dim_ = 0;
  bool interleaved_ = false;
  float cos_sin_scale_ = 1.0f;
};

// YaRN's magnitude correction, as DeepSeek and transformers define it.
double yarn_get_mscale(double scale, double mscale);

}  // namespace strata
