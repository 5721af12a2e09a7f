#include "attention/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cache/kv_pool.h"
#include "cache/req_to_token_pool.h"
#include "ops/ops.h"

namespace strata {

namespace {
// A [rows, size / rows] host view of a test buffer.
Tensor rows_view(std::vector<float>& v, int64_t rows) {
  return Tensor::view(v.data(), {rows, static_cast<int64_t>(v.size()) / rows});
}
}  // namespace

namespace {

// Plain softmax attention over explicit (unpaged) K/V, for one query head.
std::vector<float> naive(const float* q, const std::vector<std::vector<float>>& k,
                         const std::vector<std::vector<float>>& v, int lo, int hi, float scale) {
  std::vector<double> s;
  double m = -1e30;
  for (int j = lo; j < hi; ++j) {
    double d = 0;
    for (size_t i = 0; i < k[j].size(); ++i) d += q[i] * k[j][i];
    s.push_back(d * scale);
    m = std::max(m, s.back());
  }
  double sum = 0;
  for (auto& x : s) sum += x = std::exp(x - m);
  std::vector<float> out(v[0].size(), 0.0f);
  for (int j = lo; j < hi; ++j)
    for (size_t i = 0; i < out.size(); ++i) out[i] += static_cast<float>(s[j - lo] / sum * v[j][i]);
  return out;
}

}  // namespace

// A synthetic layout whose value width (24) differs from its key width (40), the MLA shape:
// the backend must size its output and partial buffers from the pool's report.
TEST(CpuAttentionBackend, HonoursPoolLayoutWithDistinctValueWidth) {
  const int kv_heads = 1, dk = 40, dv = 24, hq = 4, page = 4;
  for (bool v_in_k : {false, true}) {
    auto ops = make_cpu_ops();
    KVPool pool({{9, KVLayerLayout{kv_heads, dk, dv, v_in_k}}}, 256, *ops);
    TokenMemory mem(2, 128, 200, page);
    CpuAttentionBackend backend(&pool, &mem.req_to_token());
    backend.set_decode_split_tokens(3);  // several splits even for short sequences
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    const int lens[2] = {11, 5};
    std::vector<std::vector<float>> ks[2], vs[2];
    ForwardBatch prefill;
    std::vector<float> k_new, v_new;
    for (int b = 0; b < 2; ++b) {
      const int row = mem.req_to_token().alloc();
      std::vector<int32_t> slots(lens[b]);
      ASSERT_TRUE(mem.extend(row, 0, lens[b], slots.data()));
      prefill.req_pool_indices.push_back(row);
      prefill.prefix_lens.push_back(0);
      prefill.extend_lens.push_back(lens[b]);
      for (int i = 0; i < lens[b]; ++i) {
        std::vector<float> k(dk), v(dv);
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        if (v_in_k) std::copy(k.begin(), k.begin() + dv, v.begin());
        ks[b].push_back(k);
        vs[b].push_back(v);
        k_new.insert(k_new.end(), k.begin(), k.end());
        v_new.insert(v_new.end(), v.begin(), v.end());
        prefill.input_ids.push_back(0);
        prefill.positions.push_back(i);
        prefill.out_cache_loc.push_back(slots[i]);
      }
    }
    const int t = prefill.num_tokens();
    std::vector<float> q(t * hq * dk), out(t * hq * dv);
    for (auto& x : q) x = nd(rng);
    AttentionCall call{9, hq, 0.1f, 0, 0.0f, nullptr};
    backend.prepare(prefill);
    Tensor out_t = rows_view(out, t);
    backend.forward(call, rows_view(q, t), rows_view(k_new, t), rows_view(v_new, t), out_t);
    int tok = 0;
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < lens[b]; ++i, ++tok)
        for (int h = 0; h < hq; ++h) {
          auto ref = naive(&q[(tok * hq + h) * dk], ks[b], vs[b], 0, i + 1, 0.1f);
          for (int d = 0; d < dv; ++d) EXPECT_NEAR(out[(tok * hq + h) * dv + d], ref[d], 1e-4);
        }

    // One decode step for both requests: split-KV partials sized with dv.
    ForwardBatch decode;
    decode.mode = ForwardMode::Decode;
    std::vector<float> kd, vd;
    for (int b = 0; b < 2; ++b) {
      int32_t slot;
      ASSERT_TRUE(mem.extend(prefill.req_pool_indices[b], lens[b], lens[b] + 1, &slot));
      std::vector<float> k(dk), v(dv);
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      if (v_in_k) std::copy(k.begin(), k.begin() + dv, v.begin());
      ks[b].push_back(k);
      vs[b].push_back(v);
      kd.insert(kd.end(), k.begin(), k.end());
      vd.insert(vd.end(), v.begin(), v.end());
      decode.req_pool_indices.push_back(prefill.req_pool_indices[b]);
      decode.prefix_lens.push_back(lens[b]);
      decode.extend_lens.push_back(1);
      decode.input_ids.push_back(0);
      decode.positions.push_back(lens[b]);
      decode.out_cache_loc.push_back(slot);
    }
    std::vector<float> qd(2 * hq * dk), od(2 * hq * dv);
    for (auto& x : qd) x = nd(rng);
    backend.prepare(decode);
    Tensor od_t = rows_view(od, 2);
    backend.forward(call, rows_view(qd, 2), rows_view(kd, 2), rows_view(vd, 2), od_t);
    ASSERT_EQ(backend.decode_partial_shape().size(), 4u);
    EXPECT_EQ(backend.decode_partial_shape()[3], dv);
    EXPECT_GT(backend.decode_partial_shape()[2], 1);
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < hq; ++h) {
        auto ref = naive(&qd[(b * hq + h) * dk], ks[b], vs[b], 0, lens[b] + 1, 0.1f);
        for (int d = 0; d < dv; ++d) EXPECT_NEAR(od[(b * hq + h) * dv + d], ref[d], 1e-4);
      }
  }
}

}  // namespace strata
