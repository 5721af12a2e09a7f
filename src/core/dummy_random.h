#pragma once
// The values of --load-format dummy: uniform with a given standard deviation, a pure function
// of (seed, element index). Host and device compute the same expression, so a dummy model has
// the same weights on every device (up to the device's storage rounding) and CPU = CUDA checks
// can run on dummy models of real shapes.
#include <cstdint>
#include <string>

#include "core/counter_random.h"

namespace strata {

// FNV-1a of a tensor name: a stable per-tensor stream id (std::hash may differ between builds).
inline uint64_t dummy_stream(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h ^ (seed * kGoldenGamma);
}

STRATA_HOST_DEVICE inline float dummy_value(uint64_t stream, uint64_t index, float stddev) {
  const float u = uniform24(mix64(stream + index * kGoldenGamma));  // [0, 1)
  return (2.0f * u - 1.0f) * stddev * 1.7320508f;                   // std of U(-a, a) = a/sqrt(3)
}

}  // namespace strata
