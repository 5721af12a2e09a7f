#pragma once
// Counter-based random numbers: a pure function of their inputs, not of a generator's history,
// computed the same way on the host and in CUDA kernels. The dummy weights
// (core/dummy_random.h) and the sampling rule's draws (ops/sampling.h) both come from here.
#include <cstdint>

#include "core/host_device.h"

namespace strata {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

// SplitMix64: the next output after state x (a bijection of 64-bit words that spreads every
// input bit).
STRATA_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x += kGoldenGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The top 24 bits of r as a float in [0, 1) (exact in a float).
STRATA_HOST_DEVICE inline float uniform24(uint64_t r) {
  return static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
}

}  // namespace strata
