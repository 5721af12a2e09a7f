#pragma once
#include <cstdint>

namespace strata::cpu {

// y[m, n] = x[m, k] . w[n, k]^T (+ bias[n]): the layout of a PyTorch nn.Linear weight.
// OpenBLAS does the work on all cores.
void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y);

// y[m, n] = x[m, k] . w[k, n]
void matmul(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y);

void set_num_threads(int n);

}  // namespace strata::cpu
