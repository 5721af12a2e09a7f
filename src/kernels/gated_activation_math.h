#pragma once
// Gated activations whose form is not act(gate) * up, written once for the CPU reference and
// the CUDA kernels.
#include <cmath>

#include "core/host_device.h"

namespace strata {

// gpt-oss's clamped SwiGLU: gate clamped above and up on both sides at `limit`, then
// (up + 1) * gate * sigmoid(alpha * gate).
constexpr float kClampedSwigluAlpha = 1.702f, kClampedSwigluLimit = 7.0f;
STRATA_HOST_DEVICE inline float clamped_swiglu(float gate, float up) {
  const float g = gate < kClampedSwigluLimit ? gate : kClampedSwigluLimit;
  const float u = up < -kClampedSwigluLimit  ? -kClampedSwigluLimit
                  : up > kClampedSwigluLimit ? kClampedSwigluLimit
                                             : up;
  return (u + 1.0f) * (g / (1.0f + expf(-kClampedSwigluAlpha * g)));
}

}  // namespace strata
