// The register-tiled extend kernel (attention_extend_tiles.cu) at both row counts per warp: 16
// and 32 rows must give the same bits (each row's products, masks and online softmax run in
// the same order over the same 64-key tiles; only the K / V fragment reuse differs), so a row's
// output does not depend on the batch that picked the tiling; and both must match a
// double-precision reference over the same bf16 inputs. One batch holds extends that leave blocks
// partly filled (1, 7, 65, 130, 333 rows), cached prefixes, a window, a soft cap and sinks; the
// page table is a shuffled permutation, so neighbouring keys live in distant rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_test_reference.h"
#include "kernels/cuda/device_buffer.h"

namespace strata::cuda {
namespace {

// The tiling extend_attention picks: 32 rows a warp once max_extend x batch reaches 4096 (host
// logic: runs in every CUDA build, with or without a GPU).
TEST(ExtendRowsPerWarp, ThirtyTwoFrom4096RowsOfBlocks) {
  EXPECT_EQ(extend_rows_per_warp(1024, 1), 16);
  EXPECT_EQ(extend_rows_per_warp(4095, 1), 16);
  EXPECT_EQ(extend_rows_per_warp(4096, 1), 32);
  EXPECT_EQ(extend_rows_per_warp(8192, 1), 32);
  EXPECT_EQ(extend_rows_per_warp(1024, 8), 32);
}

struct ExtendCase {
  int head_dim, window;
  float softcap;
  bool sinks;
};

using CudaExtendTiles = test::GpuCaseTest<ExtendCase>;

TEST_P(CudaExtendTiles, RowsPerWarpAgreeToTheBitAndMatchTheReference) {
  const ExtendCase c = GetParam();
  const int d = c.head_dim, hq = 8, hkv = 2, group = hq / hkv;
  const std::vector<int> ext = {1, 7, 65, 130, 333, 64}, prefix = {0, 5, 100, 64, 17, 0};
  const int n = int(ext.size());
  std::vector<int32_t> offsets(n + 1, 0);
  for (int b = 0; b < n; ++b) offsets[b + 1] = offsets[b] + ext[b];
  const int tokens = offsets[n];
  int stride = 0;
  for (int b = 0; b < n; ++b) stride = std::max(stride, prefix[b] + ext[b]);
  int slots = 0;
  for (int b = 0; b < n; ++b) slots += prefix[b] + ext[b];

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t width = int64_t(hkv) * d;
  std::vector<uint16_t> k(slots * width), v(slots * width);
  for (auto& x : k) x = f32_to_bf16(u(rng));
  for (auto& x : v) x = f32_to_bf16(u(rng));
  std::vector<float> q(int64_t(tokens) * hq * d);
  for (auto& x : q) x = u(rng);
  std::vector<int32_t> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(int64_t(n) * stride, 0), pools(n);
  for (int b = 0, next = 0; b < n; ++b) {
    pools[b] = n - 1 - b;  // rows of the table out of batch order
    for (int pos = 0; pos < prefix[b] + ext[b]; ++pos)
      table[int64_t(pools[b]) * stride + pos] = perm[next++];
  }
  std::vector<float> sinks(hq);
  for (auto& x : sinks) x = 2.0f * u(rng);

  DeviceBuffer dk = to_device(k), dv = to_device(v), dq = to_device(q), dtable = to_device(table),
               dpools = to_device(pools), dprefix = to_device(prefix),
               doffsets = to_device(offsets), dsinks = to_device(sinks);
  const DeviceKV kv{dk.as<bf16>(), dv.as<bf16>(), width, width, hkv, d, d};
  const PagedBatch batch{dtable.as<int32_t>(),   stride,
                         dpools.as<int32_t>(),   dprefix.as<int32_t>(),
                         doffsets.as<int32_t>(), n};
  const AttentionParams p =
      test::test_params(hq, d, c.window, c.softcap, c.sinks ? dsinks.as<float>() : nullptr);
  const int max_extend = *std::max_element(ext.begin(), ext.end());

  const size_t out_count = size_t(tokens) * hq * d;
  std::vector<std::vector<float>> outs;
  for (int rows_per_warp : {16, 32}) {
    DeviceBuffer out(out_count * sizeof(float));
    extend_attention(dq.as<float>(), kv, batch, p, max_extend, out.as<float>(), nullptr,
                     rows_per_warp);
    STRATA_CUDA_CHECK(cudaDeviceSynchronize());
    outs.push_back(to_host<float>(out.data(), out_count));
  }
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), out_count * sizeof(float)), 0)
      << "16 and 32 rows per warp differ";

  // The reference: scores and softmax in double. The kernel rounds q and the probabilities to
  // bf16, so the tolerance is bf16's.
  double worst = 0.0;
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < ext[b]; ++i) {
      const int pos = prefix[b] + i, tok = offsets[b] + i;
      const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
      for (int h = 0; h < hq; ++h) {
        const std::vector<double> want = test::reference_row(
            &q[(int64_t(tok) * hq + h) * d], p.scale, k.data(), v.data(), width, h / group, d,
            &table[int64_t(pools[b]) * stride], lo, pos, c.softcap, c.sinks ? &sinks[h] : nullptr);
        for (int e = 0; e < d; ++e)
          worst = std::max(worst, std::abs(outs[1][(int64_t(tok) * hq + h) * d + e] - want[e]));
      }
    }
  EXPECT_LT(worst, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaExtendTiles,
                         testing::Values(ExtendCase{128, 0, 0.0f, false},
                                         ExtendCase{64, 0, 0.0f, false},
                                         ExtendCase{128, 70, 0.0f, true},
                                         ExtendCase{64, 100, 30.0f, false},
                                         ExtendCase{128, 0, 30.0f, true}),
                         [](const testing::TestParamInfo<ExtendCase>& info) {
                           const ExtendCase& c = info.param;
                           return "d" + std::to_string(c.head_dim) + "_w" +
                                  std::to_string(c.window) + "_softcap" +
                                  std::to_string(int(c.softcap)) + (c.sinks ? "_sinks" : "");
                         });

}  // namespace
}  // namespace strata::cuda
