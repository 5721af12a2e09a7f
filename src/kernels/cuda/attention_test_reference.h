#pragma once
// What the CUDA attention kernels' own tests (attention_extend_test.cpp,
// attention_decode_test.cpp) share: the GPU fixture and one query row's attention in double
// precision over the same bf16 keys and values the kernel reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"

namespace strata::cuda::test {

template <typename Case>
class GpuCaseTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string why;
    if (!device_present(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  }
};

// The parameters both tests run the kernels with: rows of hq heads of width d, 1 / sqrt(d).
inline AttentionParams test_params(int hq, int d, int window, float softcap, const float* sinks) {
  AttentionParams p;
  p.num_q_heads = hq;
  p.q_row_stride = int64_t(hq) * d;
  p.scale = 1.0f / std::sqrt(float(d));
  p.sliding_window = window;
  p.softcap = softcap;
  p.sinks = sinks;
  return p;
}

// The output of query row `q` (d values, scaled by `scale` here) over keys [lo, pos] of its
// request: key `key` is row slots[key] of k and v (rows of `width` bf16 values, this head's at
// kv_head * d); soft cap as tanh; `sink` (null: none) counts in the softmax's sum only.
inline std::vector<double> reference_row(const float* q, float scale, const uint16_t* k,
                                         const uint16_t* v, int64_t width, int kv_head, int d,
                                         const int32_t* slots, int lo, int pos, float softcap,
                                         const float* sink) {
  std::vector<double> score(pos + 1 - lo);
  double mx = sink ? *sink : -INFINITY;
  for (int key = lo; key <= pos; ++key) {
    const uint16_t* krow = k + int64_t{slots[key]} * width + int64_t{kv_head} * d;
    double s = 0.0;
    for (int e = 0; e < d; ++e) s += double(q[e]) * scale * bf16_to_f32(krow[e]);
    if (softcap > 0) s = softcap * std::tanh(s / softcap);
    mx = std::max(mx, score[key - lo] = s);
  }
  double total = sink ? std::exp(*sink - mx) : 0.0;
  for (double& s : score) total += (s = std::exp(s - mx));
  std::vector<double> out(d, 0.0);
  for (int key = lo; key <= pos; ++key) {
    const uint16_t* vrow = v + int64_t{slots[key]} * width + int64_t{kv_head} * d;
    for (int e = 0; e < d; ++e) out[e] += score[key - lo] * bf16_to_f32(vrow[e]);
  }
  for (double& o : out) o /= total;
  return out;
}

}  // namespace strata::cuda::test
