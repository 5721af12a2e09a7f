#pragma once
// Element-wise and row-wise CPU ops. All take raw row-major f32 buffers.
#include <cstdint>

namespace strata::cpu {

// out[r] = x[r] / rms(x[r]) * (w + offset); offset 1 for Gemma-style (1 + w) weights.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t width, float eps, float* out,
              float weight_offset = 0.0f);
// a[i] += b[i]
void add_inplace(float* a, const float* b, int64_t n);
// gate_up [rows, 2 * width] = [gate | up] -> out [rows, width] = act(gate) * up
void silu_and_mul(const float* gate_up, int64_t rows, int64_t width, float* out);
void gelu_tanh_and_mul(const float* gate_up, int64_t rows, int64_t width, float* out);
// x / (1 + e^-x) with exp_approx, the same bits whether silu_and_mul takes AVX-512 or not
// (activations.cpp).
float silu(float x);
// e^x within 2 ulp (Cephes' expf), the same bits on every CPU.
float exp_approx(float x);
float softplus(float x);

}  // namespace strata::cpu
