#pragma once
// The CPU reference of MoE routing and rotary embedding (kernels every device is checked against).
#include <cstdint>

#include "ops/ops.h"

namespace strata::cpu {

// Routes `rows` tokens: router_logits [rows, num_experts] -> expert_ids / weights
// [rows, top_k]. `bias` [num_experts] is read only when cfg.correction_bias. Experts of one
// token come out in descending order of their choice score (layers/moe.h has the math).
void route_tokens(const RouterConfig& cfg, const float* router_logits, int64_t rows,
                  const float* bias, int32_t* expert_ids, float* weights);

// Rotates `num_heads` heads of each token in place; head h of token t starts at
// x + t * row_stride + h * head_stride; inv_freq [rotary_dim / 2].
void rope(float* x, int64_t num_tokens, int num_heads, int64_t row_stride, int64_t head_stride,
          const int32_t* positions, const float* inv_freq, int rotary_dim, bool interleaved,
          float cos_sin_scale);

}  // namespace strata::cpu
