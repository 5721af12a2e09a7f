#pragma once
// One definition of how a token is drawn from a row of logits, for every device: the CPU
// reference (sample_row, also what the host sampler runs after its logit adjustments) and the
// CUDA kernel (kernels/cuda/sampling.cu) compute the same thing:
//
//   greedy (temperature 0 or top_k 1): the first maximum.
//   otherwise, with m = max logit and w_i = exp((x_i - m) / T):
//     keep x_i >= t_k, the k-th largest logit (top_k; ties at t_k all stay);
//     keep w_i >= min_p (min_p: relative to the most likely token, whose w is 1);
//     keep x_i >= t_p, the largest logit whose upper tail holds top_p of the top-k mass;
//     then pick, in vocabulary order, the token where the running sum of the kept w_i first
//     exceeds u * (their total), u = counter_uniform(seed, step).
//
// The random number is a pure function of the request's seed and the output position, not of
// a generator's history, so a seeded request draws the same numbers on any device, in any
// batch, after a retraction, or in another pipeline stage.
#include <cstdint>
#include <cstring>

#include "core/counter_random.h"

namespace strata {

// A request's draw for one pass, packed as 8 int32 (it travels with the pass's metadata).
struct SamplingRow {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint32_t seed_lo = 0, seed_hi = 0;
  int32_t step = 0;  // output tokens so far: which random number this draw uses
  int32_t reserved = 0;

  static SamplingRow greedy() { return {}; }
  // From its kSamplingRowInts packed int32 (the pass metadata).
  STRATA_HOST_DEVICE static SamplingRow unpack(const int32_t* packed) {
    SamplingRow row;
    memcpy(static_cast<void*>(&row), packed, sizeof(row));
    return row;
  }
  void pack(int32_t* packed) const {
    memcpy(packed, static_cast<const void*>(this), sizeof(*this));
  }
  bool is_greedy() const { return temperature == 0.0f || top_k == 1; }
  STRATA_HOST_DEVICE uint64_t seed() const {
    return (static_cast<uint64_t>(seed_hi) << 32) | seed_lo;
  }
  void set_seed(uint64_t s) {
    seed_lo = static_cast<uint32_t>(s);
    seed_hi = static_cast<uint32_t>(s >> 32);
  }
};
static_assert(sizeof(SamplingRow) == 8 * sizeof(int32_t), "SamplingRow packs as 8 int32");
constexpr int kSamplingRowInts = 8;

// A uniform number in [0, 1) with 24 random bits (exact in a float), from (seed, step).
STRATA_HOST_DEVICE inline float counter_uniform(uint64_t seed, int32_t step) {
  return uniform24(mix64(mix64(seed) ^ static_cast<uint64_t>(static_cast<uint32_t>(step))));
}

// The CPU reference of the rule above, on one row of `vocab` logits.
int sample_row(const float* logits, int vocab, const SamplingRow& row);

}  // namespace strata
