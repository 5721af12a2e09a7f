#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace strata::cpu {

namespace {

// q . k over n floats as 16 interleaved partial sums added in a fixed tree at the end: the
// lanes are independent, so the compiler keeps them in vector registers of whatever width the
// build targets and the result is the same bit for bit on every CPU. (One running sum was a
// chain of n dependent adds: at 128 wide, about 500 cycles a key, 10% of an int8 decode step.)
float dot(const float* q, const float* k, int n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += q[d + l] * k[d + l];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  float s = lanes[0];
  for (; d < n; ++d) s += q[d] * k[d];
  return s;
}

}  // namespace

void attend_range(const float* q, const PagedKV& kv, int kv_head, const int32_t* slots, int begin,
                  int end, const ScoreParams& p, float* scores, float* out, float* lse) {
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;
  std::memset(out, 0, sizeof(float) * dv);
  if (end <= begin) {
    *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  float max_score = -std::numeric_limits<float>::infinity();
  for (int j = begin; j < end; ++j) {
    const float* k = kv.k + static_cast<int64_t>(slots[j]) * kv.k_row_stride + kv_head * dk;
    float s = dot(q, k, dk) * p.scale;
    if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
    scores[j - begin] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0.0f;
  for (int j = begin; j < end; ++j) {
    const float w = std::exp(scores[j - begin] - max_score);
    sum += w;
    const float* v = kv.v + static_cast<int64_t>(slots[j]) * kv.v_row_stride + kv_head * dv;
    for (int d = 0; d < dv; ++d) out[d] += w * v[d];
  }
  const float inv = 1.0f / sum;
  for (int d = 0; d < dv; ++d) out[d] *= inv;
  *lse = max_score + std::log(sum);
}

void merge_partials(const float* partial_out, const float* partial_lse, int n, int dv, float sink,
                    float* out) {
  float m = sink;
  for (int i = 0; i < n; ++i) m = std::max(m, partial_lse[i]);
  std::memset(out, 0, sizeof(float) * dv);
  if (std::isinf(m) && m < 0) return;  // nothing to attend to
  float denom = std::isinf(sink) ? 0.0f : std::exp(sink - m);
  for (int i = 0; i < n; ++i) {
    if (std::isinf(partial_lse[i])) continue;
    const float w = std::exp(partial_lse[i] - m);
    denom += w;
    for (int d = 0; d < dv; ++d) out[d] += w * partial_out[static_cast<int64_t>(i) * dv + d];
  }
  const float inv = 1.0f / denom;
  for (int d = 0; d < dv; ++d) out[d] *= inv;
}

}  // namespace strata::cpu
