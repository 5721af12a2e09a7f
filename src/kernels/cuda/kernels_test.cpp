// Every CUDA kernel of the dense path against the CPU implementation, on random inputs of
// awkward sizes. Skips (visibly) where no GPU is present; attention kernels are tested
// through the CUDA backend in runtime/cuda/cuda_backend_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "layers/rope.h"

namespace strata::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    std::string why_;                                                         \
    if (!device_present(&why_)) GTEST_SKIP() << "GPU test skipped: " << why_; \
  } while (0)

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float round_bf16(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

std::vector<float> from_bf16_bits(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}

// Max over i of |a - b| / (|b| + floor).
double max_rel(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-3) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    m = std::max(m, std::abs(a[i] - b[i]) / (std::abs(b[i]) + floor));
  }
  return m;
}

TEST(CudaKernels, RmsNormMatchesCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (int width : {1, 33, 128, 4100}) {
    for (int rows : {1, 3, 7}) {
      const auto x = random_floats(size_t(rows) * width, rng, -3, 3), w = random_floats(width, rng);
      std::vector<float> ref(x.size());
      cpu::rms_norm(x.data(), w.data(), rows, width, 1e-6f, ref.data());
      DeviceBuffer dx = to_device(x), dw = to_device(w), out(x.size() * 4), out16(x.size() * 2);
      rms_norm(dx.as<float>(), nullptr, dw.as<float>(), rows, width, 1e-6f, 0.0f, out.as<float>(),
               nullptr);
      rms_norm(dx.as<float>(), nullptr, dw.as<float>(), rows, width, 1e-6f, 0.0f, out16.as<bf16>(),
               nullptr);
      EXPECT_LT(max_rel(to_host<float>(out.data(), x.size()), ref), 1e-4) << width << "x" << rows;
      EXPECT_LT(max_rel(from_bf16_bits(to_host<uint16_t>(out16.data(), x.size())), ref), 8e-3);
      // Selected rows (the LM head's last-token rows), in reverse order.
      std::vector<int32_t> pick;
      for (int r = rows - 1; r >= 0; --r) pick.push_back(r);
      DeviceBuffer dpick = to_device(pick);
      rms_norm(dx.as<float>(), dpick.as<int32_t>(), dw.as<float>(), rows, width, 1e-6f, 0.0f,
               out.as<float>(), nullptr);
      const auto got = to_host<float>(out.data(), x.size());
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < width; ++i)
          ASSERT_NEAR(got[size_t(r) * width + i], ref[size_t(rows - 1 - r) * width + i],
                      1e-4 * (1 + std::abs(ref[i])));
    }
  }
}

TEST(CudaKernels, QkNormRopeMatchesCpuForEveryRopeVariant) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  RopeConfig llama3;
  llama3.type = "llama3", llama3.theta = 500000, llama3.factor = 8, llama3.low_freq_factor = 1,
  llama3.high_freq_factor = 4, llama3.original_max_position_embeddings = 8192;
  RopeConfig yarn;
  yarn.type = "yarn", yarn.theta = 10000, yarn.factor = 4,
  yarn.original_max_position_embeddings = 4096;
  RopeConfig linear;
  linear.type = "linear", linear.factor = 2;
  struct Case {
    RopeConfig rope;
    int head_dim, rotary_dim;
    bool qk_norm;
  };
  for (const Case& c : {Case{RopeConfig{}, 64, 64, false}, Case{llama3, 128, 128, false},
                        Case{yarn, 64, 64, true}, Case{linear, 96, 48, true}}) {
    const int tokens = 5, hq = 6, hk = 2, hd = c.head_dim;
    const int64_t stride = int64_t(hq + 2 * hk) * hd;  // q | k | v, as the executor's qkv rows
    auto qkv = random_floats(tokens * stride, rng, -2, 2);
    std::vector<int32_t> pos = {0, 1, 17, 4095, 70000};
    const auto qn = random_floats(hd, rng), kn = random_floats(hd, rng);
    const RotaryEmbedding rope(c.rope, c.rotary_dim);
    std::vector<float> ref = qkv;
    for (int t = 0; t < tokens; ++t) {
      float* row = ref.data() + t * stride;
      if (c.qk_norm) {
        cpu::rms_norm(row, qn.data(), hq, hd, 1e-6f, row);
        cpu::rms_norm(row + hq * hd, kn.data(), hk, hd, 1e-6f, row + hq * hd);
      }
    }
    rope.apply(ref.data(), tokens, hq, stride, hd, pos.data());
    rope.apply(ref.data() + hq * hd, tokens, hk, stride, hd, pos.data());

    DeviceBuffer dqkv = to_device(qkv), dpos = to_device(pos), dinv = to_device(rope.inv_freq());
    DeviceBuffer dqn = to_device(qn), dkn = to_device(kn);
    RopeParams p;
    p.num_q_heads = hq, p.num_k_heads = hk, p.head_dim = hd, p.row_stride = stride,
    p.k_offset = hq * hd;
    if (c.qk_norm) p.q_norm = dqn.as<float>(), p.k_norm = dkn.as<float>();
    p.inv_freq = dinv.as<float>(), p.rotary_dim = c.rotary_dim,
    p.cos_sin_scale = rope.cos_sin_scale();
    qk_norm_rope(dqkv.as<float>(), dpos.as<int32_t>(), tokens, p, nullptr);
    const auto got = to_host<float>(dqkv.data(), qkv.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, double(std::abs(got[i] - ref[i])));
    EXPECT_LT(worst, 2e-4) << c.rope.type << " head_dim " << hd;
  }
}

TEST(CudaKernels, GatedActivationsMatchCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (bool gelu : {false, true}) {
    const int rows = 3, width = 1001;
    const auto gu = random_floats(size_t(rows) * 2 * width, rng, -6, 6);
    std::vector<float> ref(size_t(rows) * width);
    if (gelu)
      cpu::gelu_tanh_and_mul(gu.data(), rows, width, ref.data());
    else
      cpu::silu_and_mul(gu.data(), rows, width, ref.data());
    DeviceBuffer dgu = to_device(gu), out(ref.size() * 2);
    gated_act(dgu.as<float>(), rows, width, gelu, out.as<bf16>(), nullptr);
    EXPECT_LT(max_rel(from_bf16_bits(to_host<uint16_t>(out.data(), ref.size())), ref), 8e-3)
        << gelu;
  }
}

TEST(CudaKernels, EmbeddingBiasAndArgmax) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  const int vocab = 37, width = 19;
  auto table = random_floats(size_t(vocab) * width, rng);
  for (auto& x : table) x = round_bf16(x);
  const std::vector<int32_t> ids = {36, 0, 5, 5};
  DeviceBuffer dt = to_device(to_bf16_bits(table)), dids = to_device(ids),
               out(ids.size() * width * 4);
  embedding(dt.as<bf16>(), dids.as<int32_t>(), int(ids.size()), width, out.as<float>(), nullptr);
  const auto got = to_host<float>(out.data(), ids.size() * width);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int i = 0; i < width; ++i)
      ASSERT_EQ(got[t * width + i], table[size_t(ids[t]) * width + i]);

  // Argmax over awkward vocabularies; ties go to the first index, as on the CPU.
  for (int v : {1, 31, 1025, 128256}) {
    auto logits = random_floats(size_t(3) * v, rng);
    if (v > 40) logits[size_t(v) + 7] = logits[size_t(v) + 40] = 5.0f;  // a tie in row 1
    DeviceBuffer dl = to_device(logits), dout(3 * 4);
    argmax_rows(dl.as<float>(), 3, v, dout.as<int32_t>(), nullptr);
    const auto got_ids = to_host<int32_t>(dout.data(), 3);
    for (int r = 0; r < 3; ++r) {
      const float* row = logits.data() + size_t(r) * v;
      EXPECT_EQ(got_ids[r], std::max_element(row, row + v) - row) << "vocab " << v << " row " << r;
    }
  }

  auto y = random_floats(6 * 5, rng);
  const auto bias = random_floats(5, rng);
  DeviceBuffer dy = to_device(y), db = to_device(bias);
  add_bias(dy.as<float>(), db.as<float>(), 6, 5, nullptr);
  const auto gy = to_host<float>(dy.data(), y.size());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_FLOAT_EQ(gy[i], y[i] + bias[i % 5]);
}

TEST(CudaKernels, GemmMatchesCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  Blas blas(nullptr);
  for (int m : {1, 7, 64}) {
    for (int n : {1, 200}) {
      const int k = 136;
      auto x = random_floats(size_t(m) * k, rng), w = random_floats(size_t(n) * k, rng);
      for (auto& v : x) v = round_bf16(v);
      for (auto& v : w) v = round_bf16(v);
      std::vector<float> ref(size_t(m) * n);
      cpu::linear(x.data(), m, k, w.data(), n, nullptr, ref.data());
      auto y0 = random_floats(ref.size(), rng);
      DeviceBuffer dx = to_device(to_bf16_bits(x)), dw = to_device(to_bf16_bits(w)),
                   dy = to_device(y0);
      blas.linear(dx.as<bf16>(), m, k, dw.as<bf16>(), n, dy.as<float>(),
                  1.0f);  // accumulate into y0
      const auto got = to_host<float>(dy.data(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i] + y0[i], 1e-3) << m << "x" << n;
    }
  }
}

TEST(CudaKernels, FillRandomHasTheRequestedSpread) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 1 << 20;
  DeviceBuffer buf(n * 2);
  fill_random(buf.as<bf16>(), n, 42, 0.02f, nullptr);
  const auto v = from_bf16_bits(to_host<uint16_t>(buf.data(), n));
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += double(x) * x;
  EXPECT_NEAR(sum / n, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 1e-3);
}

}  // namespace
}  // namespace strata::cuda
