#pragma once
// What a state pool stores per request for one recurrent layer. Kernels size their buffers from
// this report, never from the model config (DESIGN.md §1.2).
#include <cstdint>
#include <string>

#include "model/layer_spec.h"

namespace strata {

struct RecurrentStateLayout {
  RecurrentKind kind = RecurrentKind::Mamba2;
  int conv_channels = 0;  // conv state [conv_channels, conv_width]: the last kernel-1 inputs
  int conv_width = 0;
  int num_heads = 0;  // SSM state [num_heads, head_dim, state_size]; 0 heads: none
  int head_dim = 0;
  int state_size = 0;

  int64_t conv_numel() const { return int64_t{conv_channels} * conv_width; }
  int64_t ssm_numel() const { return int64_t{num_heads} * head_dim * state_size; }
  std::string describe() const;
};

}  // namespace strata
