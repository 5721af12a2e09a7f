#include "kernels/cpu/ops.h"

#include <cmath>

namespace strata::cpu {

void rms_norm(const float* x, const float* w, int64_t rows, int64_t width, float eps, float* out,
              float weight_offset) {
#pragma omp parallel for if (rows > 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    float* o = out + r * width;
    double ss = 0.0;
    for (int64_t i = 0; i < width; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / width) + eps);
    for (int64_t i = 0; i < width; ++i) o[i] = xr[i] * inv * (w[i] + weight_offset);
  }
}

void add_inplace(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

void gelu_tanh_and_mul(const float* gate_up, int64_t rows, int64_t width, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * width;
    const float* u = g + width;
    for (int64_t i = 0; i < width; ++i) {
      const float x = g[i];
      const float gelu = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
      out[r * width + i] = gelu * u[i];
    }
  }
}

}  // namespace strata::cpu
