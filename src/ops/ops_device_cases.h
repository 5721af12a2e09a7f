#pragma once
// The op cases of ops_device_test.cpp (CpuOps against CudaOps) and ops_weight_formats_test.cpp
// (CpuOps with bf16 or int8 weights against f32): each builds its inputs from a seeded generator on
// the ops it is given, runs one op and returns the outputs as host tensors.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace strata::ops_test {

// splitmix64: the same stream on every run and every device.
struct Rng {
  uint64_t state = 0;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
};

// Uniform in [-scale, scale], rounded to bf16 (exact in either storage dtype).
Tensor random(std::vector<int64_t> shape, Rng& rng, float scale = 1.0f);

struct Case {
  std::string name;  // a gtest parameter name: letters, digits, underscores
  uint64_t seed = 1;
  double tol = 1e-2;  // max |cpu - cuda| / max |cpu|
  std::function<std::vector<Tensor>(Ops&, Rng&)> run;
  // When set, replaces the elementwise comparison (routing tolerates near-ties).
  std::function<void(const std::vector<Tensor>& cpu, const std::vector<Tensor>& cuda)> compare;
};

std::vector<Case> all_cases();

// max |ref - got| <= tol * max |ref| (`ref` the CPU reference's output, `got` the other's);
// int32 outputs must be equal.
void expect_close(const Tensor& ref, const Tensor& got, double tol, const std::string& what);
// The recurrent-layer ops' cases (ops_recurrent_cases.cpp), part of all_cases().
void recurrent_cases(std::vector<Case>& cases);

// gtest prints a failing parameter by its name.
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

}  // namespace strata::ops_test
