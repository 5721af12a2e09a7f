// The tensor-core decode kernel (attention_decode_tiles.cu) in every configuration the bench
// sweeps, not only the shipped one the backend tests reach: 2 or 4 warps a block (32- or
// 64-key tiles) and rings of 2, 3 or 4 tiles, each at several split counts, against a
// double-precision reference over the same bf16 inputs. Requests end inside, at and just past
// tile edges and attend 1 to 1100 keys; query groups of 4 (one padded 16-row tile) and 20 (two
// tiles, the second partly filled); a window, a soft cap, sinks; a shuffled page table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

struct DecodeCase {
  int head_dim, group, window;
  float softcap;
  bool sinks;
};

using CudaDecodeTiles = test::GpuCaseTest<DecodeCase>;

TEST_P(CudaDecodeTiles, EveryWarpCountAndRingDepthMatchesTheReference) {
  const DecodeCase c = GetParam();
  const int d = c.head_dim, hkv = 2, hq = hkv * c.group;
  const std::vector<int> lens = {1, 31, 32, 33, 64, 65, 700, 1100};
  const int n = int(lens.size());
  const int stride = *std::max_element(lens.begin(), lens.end());
  const int slots = std::accumulate(lens.begin(), lens.end(), 0);

  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t width = int64_t(hkv) * d;
  std::vector<uint16_t> k(int64_t(slots) * width), v(int64_t(slots) * width);
  for (auto& x : k) x = f32_to_bf16(u(rng));
  for (auto& x : v) x = f32_to_bf16(u(rng));
  std::vector<float> q(int64_t(n) * hq * d);
  for (auto& x : q) x = u(rng);
  std::vector<int32_t> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(int64_t(n) * stride, 0), rows(n), prefix(n), offsets(n + 1);
  for (int b = 0, next = 0; b < n; ++b) {
    rows[b] = n - 1 - b;  // rows of the table out of batch order
    prefix[b] = lens[b] - 1;
    offsets[b] = b;
    for (int pos = 0; pos < lens[b]; ++pos) table[int64_t(rows[b]) * stride + pos] = perm[next++];
  }
  offsets[n] = n;
  std::vector<float> sinks(hq);
  for (auto& x : sinks) x = 2.0f * u(rng);

  DeviceBuffer dk = to_device(k), dv = to_device(v), dq = to_device(q), dtable = to_device(table),
               drows = to_device(rows), dprefix = to_device(prefix), doffsets = to_device(offsets),
               dsinks = to_device(sinks);
  const DeviceKV kv{dk.as<bf16>(), dv.as<bf16>(), width, width, hkv, d, d};
  const PagedBatch batch{dtable.as<int32_t>(),   stride, drows.as<int32_t>(), dprefix.as<int32_t>(),
                         doffsets.as<int32_t>(), n};
  const AttentionParams p =
      test::test_params(hq, d, c.window, c.softcap, c.sinks ? dsinks.as<float>() : nullptr);

  // The reference: scores and softmax in double. The kernel rounds q and the probabilities to
  // bf16, so the tolerance is bf16's.
  std::vector<double> want;
  for (int b = 0; b < n; ++b) {
    const int pos = lens[b] - 1, lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
    for (int h = 0; h < hq; ++h) {
      const std::vector<double> row = test::reference_row(
          &q[(int64_t(b) * hq + h) * d], p.scale, k.data(), v.data(), width, h / c.group, d,
          &table[int64_t(rows[b]) * stride], lo, pos, c.softcap, c.sinks ? &sinks[h] : nullptr);
      want.insert(want.end(), row.begin(), row.end());
    }
  }

  const size_t out_count = size_t(n) * hq * d;
  DeviceBuffer out(out_count * sizeof(float));
  DeviceBuffer partial(size_t(n) * hq * kMaxDecodeSplits * d * sizeof(float)),
      lse(size_t(n) * hq * kMaxDecodeSplits * sizeof(float));
  for (int warps : {2, 4})
    for (int stages : {2, 3, 4})
      for (int splits : {1, 3, 17}) {
        DecodeWorkspace ws{partial.as<float>(), lse.as<float>(), splits, 0, stages};
        ws.tile_warps = warps;
        ASSERT_STREQ(decode_kernel_name(kv, batch, p, ws), "tiles");
        decode_attention(dq.as<float>(), kv, batch, p, ws, out.as<float>(), nullptr);
        STRATA_CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = to_host<float>(out.data(), out_count);
        double worst = 0.0;
        for (size_t i = 0; i < out_count; ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
        EXPECT_LT(worst, 1e-2) << warps << " warps, " << stages << " stages, " << splits
                               << " splits";
      }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaDecodeTiles,
                         testing::Values(DecodeCase{128, 4, 0, 0.0f, false},
                                         DecodeCase{64, 4, 0, 0.0f, false},
                                         DecodeCase{128, 20, 90, 0.0f, true},
                                         DecodeCase{64, 8, 0, 30.0f, true},
                                         DecodeCase{128, 1, 0, 30.0f, false}),
                         [](const testing::TestParamInfo<DecodeCase>& info) {
                           const DecodeCase& c = info.param;
                           return "d" + std::to_string(c.head_dim) + "_group" +
                                  std::to_string(c.group) + "_w" + std::to_string(c.window) +
                                  "_softcap" + std::to_string(int(c.softcap)) +
                                  (c.sinks ? "_sinks" : "");
                         });

}  // namespace
}  // namespace strata::cuda
