#include "kernels/cpu/routing_rope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace strata {
namespace cpu {

namespace {

// Indices of the `k` largest values, largest first; ties go to the lower index (as torch.topk
// does on CPU for the small sizes routers use).
std::vector<int> top_indices(const float* v, int n, int k) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  idx.resize(k);
  return idx;
}

}  // namespace

void route_tokens(const RouterConfig& cfg, const float* router_logits, int64_t rows,
                  const float* bias, int32_t* expert_ids, float* weights) {
  const int e = cfg.num_experts, k = cfg.top_k;
  const int per_group = e / cfg.num_groups;
  std::vector<float> scores(e), choice(e), group_scores(cfg.num_groups);
  for (int64_t r = 0; r < rows; ++r) {
    const float* logits = router_logits + r * e;
    if (cfg.scoring == RouterScoring::Softmax) {
      const float m = *std::max_element(logits, logits + e);
      float sum = 0.0f;
      for (int i = 0; i < e; ++i) sum += scores[i] = std::exp(logits[i] - m);
      for (int i = 0; i < e; ++i) scores[i] /= sum;
    } else {
      for (int i = 0; i < e; ++i) scores[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    }
    for (int i = 0; i < e; ++i) choice[i] = scores[i] + (cfg.correction_bias ? bias[i] : 0.0f);

    if (cfg.num_groups > 1) {
      for (int g = 0; g < cfg.num_groups; ++g) {
        const float* c = choice.data() + g * per_group;
        if (cfg.group_score == GroupScore::Max) {
          group_scores[g] = *std::max_element(c, c + per_group);
        } else {
          const auto best = top_indices(c, per_group, 2);
          group_scores[g] = c[best[0]] + c[best[1]];
        }
      }
      std::vector<bool> kept(cfg.num_groups, false);
      for (int g : top_indices(group_scores.data(), cfg.num_groups, cfg.topk_groups))
        kept[g] = true;
      // transformers masks the other groups' experts to 0 (not -inf); kept identical on purpose.
      for (int i = 0; i < e; ++i)
        if (!kept[i / per_group]) choice[i] = 0.0f;
    }

    const auto chosen = top_indices(choice.data(), e, k);
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) {
      expert_ids[r * k + j] = chosen[j];
      sum += weights[r * k + j] = scores[chosen[j]];
    }
    const float norm = cfg.normalize_topk ? 1.0f / (sum + 1e-20f) : 1.0f;
    for (int j = 0; j < k; ++j) weights[r * k + j] *= norm * cfg.routed_scaling_factor;
  }
}

void rope(float* x, int64_t num_tokens, int num_heads, int64_t row_stride, int64_t head_stride,
          const int32_t* positions, const float* inv_freq, int rotary_dim, bool interleaved,
          float cos_sin_scale) {
  const int half = rotary_dim / 2;
#pragma omp parallel for if (num_tokens > 32)
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::vector<float> cos_v(half), sin_v(half);
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cos_v[i] = std::cos(angle) * cos_sin_scale;
      sin_v[i] = std::sin(angle) * cos_sin_scale;
    }
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + t * row_stride + h * head_stride;
      for (int i = 0; i < half; ++i) {
        float* a = interleaved ? &v[2 * i] : &v[i];
        float* b = interleaved ? &v[2 * i + 1] : &v[i + half];
        const float x1 = *a, x2 = *b;
        *a = x1 * cos_v[i] - x2 * sin_v[i];
        *b = x2 * cos_v[i] + x1 * sin_v[i];
      }
    }
  }
}

}  // namespace cpu
}  // namespace strata
