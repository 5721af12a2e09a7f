#pragma once
// The values of --load-format dummy: uniform with a given standard deviation, a pure function
// of (seed, element index). Host and device compute the same expression, so a dummy model has
// the same weights on every device (up to the device's storage rounding) and CPU = CUDA checks
// can run on dummy models of real shapes.
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata {

// FNV-1a of a tensor name: a stable per-tensor stream id (std::hash may differ between builds).
inline uint64_t dummy_stream(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h ^ (seed * 0x9e3779b97f4a7c15ull);
}

STRATA_HOST_DEVICE inline float dummy_value(uint64_t stream, uint64_t index, float stddev) {
  uint64_t z = stream + (index + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  return (2.0f * u - 1.0f) * stddev * 1.7320508f;  // std of U(-a, a) = a/sqrt(3)
}

}  // namespace strata
