#pragma once
// CPU kernels of the gated delta rule (Qwen3-Next's Gated DeltaNet layers, layers/
// gated_delta_net.h), the reference every other backend is tested against: the exact
// token-by-token recurrence (decode) and the chunked form (prefill), from and into one
// request's state. Per value head h, with k-head h / (v_heads / k_heads) and
// q, k l2-normalized per head (eps 1e-6), q scaled by 1/sqrt(k_dim):
//   S_t = exp(g_t) S_{t-1};   S_t += k_t (beta_t (v_t - S_t^T k_t))^T;   y_t = S_t^T q_t
// S [k_dim, v_dim] per head.
#include <cstdint>

namespace strata::cpu {

struct DeltaRuleArgs {
  int num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int len = 0;
  // q, k [len, k_heads * k_dim] and v [len, v_heads * v_dim], rows `stride` apart (the conv
  // output's q | k | v columns).
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t stride = 0;
  const float* beta = nullptr;  // [len, v_heads]: sigmoid(b)
  const float* g = nullptr;     // [len, v_heads]: the log decay, -exp(A_log) softplus(a + dt_bias)
};

// state [v_heads, k_dim, v_dim] (read and updated); y [len, v_heads * v_dim].
void delta_rule_sequential(const DeltaRuleArgs& a, float* state, float* y);

// The same result by chunks of `chunk_size` tokens (the WY form transformers and FLA use):
// inside a chunk the rank-one updates are folded into one lower-triangular solve, so the state
// is read and written once per chunk; the last chunk may be shorter.
void delta_rule_chunked(const DeltaRuleArgs& a, int chunk_size, float* state, float* y);

}  // namespace strata::cpu
