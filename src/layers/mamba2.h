#pragma once
// The Mamba2 mixer (NemotronH, Bamba, Falcon-H1):
//   [z | xBC | dt] = in_proj(x)
//   xBC = silu(causal_depthwise_conv1d(xBC))          (state: the last kernel-1 inputs)
//   [x | B | C] = xBC;   dt = clamp(softplus(dt + dt_bias), time_step_limit);   A = -exp(A_log)
//   y = SSM scan(x, dt, A, B, C) + D x                 (state: [heads, head_dim, state_size])
//   out = out_proj(gated_rms_norm(y, z))               (RMS over n_groups groups, or only the gate)
// Prefill runs the SSD chunked scan (chunk_size from the config) from the request's cached
// state; decode runs the one-step recurrence. State lives in the StatePool of ForwardContext.
// Written once for every device: each step is an op (ops/ops.h), batched over the pass.
#include <limits>
#include <string>
#include <vector>

#include "cache/state_layout.h"
#include "layers/linear.h"
#include "model/causal_lm.h"

namespace strata {

struct Mamba2Options {
  int layer_id = 0;
  int hidden_size = 0;
  int num_heads = 0, head_dim = 0, n_groups = 1, state_size = 0;
  int conv_kernel = 4;
  int chunk_size = 256;
  bool conv_bias = true, proj_bias = false, out_proj_bias = false;
  std::string activation = "silu";  // of the conv output
  // time_step_limit: softplus(dt + dt_bias) is clamped into [dt_min, dt_max].
  float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();
  // Output gate + norm: y * silu(z) normalized over `norm_groups` groups (norm weight loaded),
  // or, with gated_norm false, only y * silu(z).
  bool gated_norm = true;
  int norm_groups = 1;
  bool norm_before_gate = false;
  float norm_eps = 1e-5f;
  // muP (Falcon-H1): x is scaled by input_scale before in_proj, each in_proj output column by
  // in_proj_scale[column] (empty: 1).
  float input_scale = 1.0f;
  std::vector<float> in_proj_scale;
  std::string in_proj = "in_proj", conv1d = "conv1d", out_proj = "out_proj", norm = "norm";

  int intermediate() const { return num_heads * head_dim; }
  int conv_dim() const { return intermediate() + 2 * n_groups * state_size; }
  int in_proj_width() const { return intermediate() + conv_dim() + num_heads; }
};

// Mamba2 settings common to the families, read from config keys that differ only in name.
struct Mamba2ConfigKeys {
  std::string num_heads, head_dim, n_groups, state_size, conv_kernel, chunk_size, conv_bias,
      proj_bias;
};
Mamba2Options mamba2_options_from_config(const ModelConfig& c, const Mamba2ConfigKeys& keys,
                                         int layer_id);

class Mamba2Mixer {
 public:
  Mamba2Mixer(ParamLoader& w, const std::string& prefix, const Mamba2Options& opt);
  // x [T, hidden] -> [T, hidden]; reads and updates each request's state slot.
  Tensor forward(const Tensor& x, const ForwardBatch& batch, ForwardContext& ctx) const;
  RecurrentStateLayout state_layout() const;
  const Mamba2Options& options() const { return opt_; }

 private:
  Mamba2Options opt_;
  Linear in_proj_, out_proj_;
  // Everything f32 on the stage's device.
  Tensor conv_weight_, conv_bias_;  // [conv_dim, kernel], [conv_dim]
  SsmParams ssm_;                   // A = -exp(A_log), D, dt_bias [heads] and the shape
  Tensor norm_weight_;              // [intermediate] when gated_norm
  Tensor in_proj_scale_;            // [in_proj_width] when the options have multipliers
  // Tensor parallelism with norm groups wider than a rank's heads (Bamba's one group over the
  // whole width): this rank's columns are a part of group norm_group_ of norm_groups_total_,
  // whose RMS comes from every rank's sums of squares (an all-reduce over norm_ranks_).
  // Null when every norm group is within this rank's columns.
  Communicator* norm_ranks_ = nullptr;
  int norm_group_ = 0, norm_groups_total_ = 1;
  int64_t norm_group_width_ = 0;  // a whole group's columns, over every rank
};

}  // namespace strata
