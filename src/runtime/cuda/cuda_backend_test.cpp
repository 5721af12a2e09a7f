// The CUDA attention backend (and so the split-KV decode and extend kernels) against the CPU
// backend on the same batches: mixed lengths in one batch, one-token prompts, lengths at
// split boundaries, chunked prefill over a cached prefix, sliding windows, GQA groups of 1,
// 3 and 4, page sizes 1 and 16; MLA's latent rows (576 wide with the value the first 512
// columns, 16, 20, 40 and 128 query heads over one, on the tensor-core latent kernel) and awkward
// widths (k != v, not multiples of 16). K, V (and the extend q) are bf16-exact on both sides, so
// the only differences left are the GPU's bf16 probabilities in extend and summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "attention/cpu_backend.h"
#include "cache/kv_pool.h"
#include "cache/req_to_token_pool.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tensor_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/ops.h"
#include "runtime/cuda/cuda_attention_backend.h"

namespace strata {
namespace {

struct Shape {
  int hq, hkv, head_dim, window, page_size;
  // MLA's latent cache: the value is the first `latent_v` columns of the key row (0: a
  // separate value).
  int latent_v = 0;
  // The separate value's width (0: head_dim); only without latent_v.
  int value_dim = 0;
  bool sinks = false;    // a learned sink logit per q head (gpt-oss)
  float softcap = 0.0f;  // tanh soft-capping of the scores
  int v_dim() const { return latent_v > 0 ? latent_v : value_dim > 0 ? value_dim : head_dim; }
};

std::vector<float> random_bf16_exact(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(rng)));
  return v;
}

// Relative L2 error and whether every value is finite.
double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += double(got[i] - ref[i]) * (got[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class BackendPair {
 public:
  BackendPair(const Shape& s, int max_requests, int max_context)
      : s_(s),
        layout_{s.hkv, s.head_dim, s.v_dim(), s.latent_v > 0},
        memory_(max_requests, max_context, 1 << 14, s.page_size),
        cpu_ops_(make_cpu_ops()),
        gpu_ops_(0, nullptr),
        cpu_pool_({{kLayer, layout_}}, memory_.allocator().num_slots(), *cpu_ops_),
        gpu_pool_(with_dtype(std::map<int, KVLayerLayout>{{kLayer, layout_}}, DType::BF16),
                  memory_.allocator().num_slots(), gpu_ops_),
        cpu_(&cpu_pool_, &memory_.req_to_token()),
        gpu_(&gpu_pool_, &memory_.req_to_token(), nullptr) {}

  TokenMemory& memory() { return memory_; }
  CudaAttentionBackend& gpu() { return gpu_; }

  // Runs one pass on both backends with random q/k/v; returns the relative L2 error.
  // `hq` > 0: this pass's query heads instead of the shape's (the cache does not depend on
  // them: a cheap prefill for a wide decode).
  double run(const ForwardBatch& batch, std::mt19937& rng, int hq = 0) {
    const int t = batch.num_tokens();
    const int heads = hq > 0 ? hq : s_.hq;
    const int qw = heads * s_.head_dim, kw = layout_.k_width(), ow = heads * s_.v_dim();
    // The value tensor passed in: the key itself when the layout reads the value out of the
    // key row, else its own width.
    const int vw = layout_.v_in_k ? kw : layout_.v_width();
    const auto q = random_bf16_exact(size_t(t) * qw, rng, 1.0f);
    const auto k = random_bf16_exact(size_t(t) * kw, rng, 1.0f);
    auto v = random_bf16_exact(size_t(t) * vw, rng, 1.0f);
    if (layout_.v_in_k) v = k;
    AttentionCall call;
    call.layer_id = kLayer;
    call.num_q_heads = heads;
    call.scale = 1.0f / std::sqrt(float(s_.head_dim));
    call.sliding_window = s_.window;
    call.logit_softcap = s_.softcap;
    // Sinks on both sides of 0 and beyond the scores' range, so some heads give most of their
    // weight to the sink.
    std::vector<float> sinks = random_bf16_exact(heads, rng, 3.0f);
    const Tensor cpu_sinks = Tensor::view(sinks.data(), {heads});
    cuda::DeviceBuffer d_sinks = cuda::to_device(sinks);
    const Tensor gpu_sinks =
        Tensor::view(d_sinks.data(), {heads}, DType::F32, Device::cuda(cuda::current_device()));
    if (s_.sinks) call.sinks = &cpu_sinks;
    std::vector<float> ref(size_t(t) * ow);
    cpu_.prepare(batch);
    auto host = [t](std::vector<float>& x) {
      return Tensor::view(x.data(), {t, static_cast<int64_t>(x.size()) / t});
    };
    auto q_h = q, k_h = k, v_h = v;
    Tensor ref_t = host(ref);
    cpu_.forward(call, host(q_h), host(k_h), host(v_h), ref_t);
    cuda::DeviceBuffer dq = cuda::to_device(q), dk = cuda::to_device(k), dv = cuda::to_device(v);
    std::vector<float> poison(ref.size(), NAN);
    cuda::DeviceBuffer dout = cuda::to_device(poison);  // every output must be written
    gpu_.prepare(batch);
    auto dev = [t](const cuda::DeviceBuffer& b, int64_t width) {
      return Tensor::view(b.data(), {t, width}, DType::F32, Device::cuda(cuda::current_device()));
    };
    Tensor out_t = dev(dout, ow);
    if (s_.sinks) call.sinks = &gpu_sinks;
    gpu_.forward(call, dev(dq, qw), dev(dk, kw), dev(dv, vw), out_t);
    STRATA_CUDA_CHECK(cudaDeviceSynchronize());
    return rel_l2(cuda::to_host<float>(dout.data(), ref.size()), ref);
  }

  static constexpr int kLayer = 5;  // not layer 0: the pool answers for the ids it holds

 private:
  Shape s_;
  KVLayerLayout layout_;
  TokenMemory memory_;
  std::unique_ptr<Ops> cpu_ops_;
  CudaOps gpu_ops_;
  KVPool cpu_pool_, gpu_pool_;
  CpuAttentionBackend cpu_;
  CudaAttentionBackend gpu_;
};

// Adds `n` new tokens of request row `row` (holding `cached` tokens) to `batch`.
void add(ForwardBatch& batch, TokenMemory& memory, int row, int cached, int n) {
  std::vector<int32_t> slots(n);
  ASSERT_TRUE(memory.extend(row, cached, cached + n, slots.data()));
  batch.req_pool_indices.push_back(row);
  batch.prefix_lens.push_back(cached);
  batch.extend_lens.push_back(n);
  for (int i = 0; i < n; ++i) {
    batch.input_ids.push_back(0);
    batch.positions.push_back(cached + i);
    batch.out_cache_loc.push_back(slots[i]);
  }
}

// A parameterized test that needs a GPU: skipped, with the reason, where there is none.
template <typename Param>
class GpuTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::device_present(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  }
};

class CudaBackendVsCpu : public GpuTest<Shape> {};

TEST_P(CudaBackendVsCpu, PrefillChunkedPrefillAndDecodeMatch) {
  const Shape s = GetParam();
  std::mt19937 rng(7);
  // Mixed lengths: one token, odd, at and around 64-token tiles, long.
  const std::vector<int> prompt = {1, 7, 64, 65, 130, 333};
  const std::vector<int> chunk = {1, 64, 1, 3, 129, 200};  // second extend over a cached prefix
  const int n = int(prompt.size());
  BackendPair pair(s, n, 1024);
  std::vector<int> rows(n), len(n, 0);
  for (int i = 0; i < n; ++i) rows[i] = pair.memory().req_to_token().alloc();

  ForwardBatch prefill;
  for (int i = 0; i < n; ++i)
    add(prefill, pair.memory(), rows[i], 0, prompt[i]), len[i] = prompt[i];
  EXPECT_LT(pair.run(prefill, rng), 1e-2) << "prefill";

  ForwardBatch extend;
  for (int i = 0; i < n; ++i)
    add(extend, pair.memory(), rows[i], len[i], chunk[i]), len[i] += chunk[i];
  EXPECT_LT(pair.run(extend, rng), 1e-2) << "extend over a cached prefix";

  // Decode steps with automatic and forced split counts (1 split, splits that do not divide
  // the lengths, the maximum).
  for (int splits : {0, 1, 3, 7, 32}) {
    pair.gpu().set_decode_splits(splits);
    ForwardBatch decode;
    decode.mode = ForwardMode::Decode;
    for (int i = 0; i < n; ++i) add(decode, pair.memory(), rows[i], len[i], 1), len[i] += 1;
    EXPECT_LT(pair.run(decode, rng), 2e-3) << "decode, splits " << splits;
    // DeepSeek's latent rows (576 / 512) go to the tensor-core latent kernel; every other
    // layout (the fixtures' 80 / 64 latent too) keeps its kernel.
    const bool mla = s.hkv == 1 && s.head_dim == 576 && s.latent_v == 512;
    if (mla) {
      EXPECT_EQ(pair.gpu().decode_kernel(), "mla_tiles");
    } else {
      EXPECT_NE(pair.gpu().decode_kernel(), "mla_tiles");
    }
    const auto& shape = pair.gpu().decode_partial_shape();
    ASSERT_EQ(shape.size(), 4u);
    EXPECT_EQ(shape[0], n);
    EXPECT_EQ(shape[1], s.hq);
    EXPECT_EQ(shape[3], s.v_dim());  // Lv from the pool's layout (the latent for MLA)
    if (splits > 0) {
      EXPECT_EQ(shape[2], splits);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaBackendVsCpu,
    testing::Values(
        Shape{8, 2, 128, 0, 1}, Shape{8, 2, 128, 0, 16}, Shape{4, 4, 64, 0, 16},
        Shape{6, 2, 32, 9, 1}, Shape{32, 8, 128, 100, 16}, Shape{2, 1, 256, 0, 1},
        Shape{4, 2, 80, 0, 1},
        // DeepSeek fixtures' latent: 64 + 16 rope, value 64
        // (not v_head_dim 32), 4 and 16 heads over one.
        Shape{4, 1, 80, 0, 1, 64}, Shape{16, 1, 80, 0, 16, 64},
        // DeepSeek-V2/V3's latent: 512 + 64 rope, value the
        // first 512; V2-Lite's 16 and V3's 128 heads over one.
        Shape{16, 1, 576, 0, 16, 512}, Shape{16, 1, 576, 0, 1, 512}, Shape{128, 1, 576, 0, 16, 512},
        // Awkward widths: not multiples of 16, k != v inside
        // the key row and separate, GQA on wide rows, a
        // window on the wide path, the widest extend tile
        // (640, separate value) with an odd group.
        Shape{8, 1, 200, 0, 16, 136}, Shape{6, 2, 200, 0, 1, 0, 136},
        Shape{8, 2, 576, 0, 16, 0, 512}, Shape{4, 1, 328, 50, 1, 264},
        Shape{3, 1, 640, 0, 1, 0, 640},
        // gpt-oss: sinks, with and without a window, GQA and MHA; Gemma 2-style
        // soft-capping (also on a 256-wide head, Gemma 3's width).
        Shape{4, 2, 64, 8, 16, 0, 0, true}, Shape{8, 8, 64, 0, 1, 0, 0, true},
        Shape{6, 2, 32, 9, 1, 0, 0, true, 30.0f}, Shape{4, 1, 256, 100, 16, 0, 0, false, 50.0f},
        // The register-tiled extend kernel's widths with a soft cap and with
        // sinks under a window.
        Shape{4, 2, 128, 0, 16, 0, 0, false, 30.0f}, Shape{4, 2, 64, 20, 1, 0, 0, false, 30.0f},
        Shape{8, 2, 128, 70, 1, 0, 0, true}),
    [](const testing::TestParamInfo<Shape>& info) {
      const Shape& s = info.param;
      return "hq" + std::to_string(s.hq) + "_hkv" + std::to_string(s.hkv) + "_d" +
             std::to_string(s.head_dim) + "_w" + std::to_string(s.window) + "_page" +
             std::to_string(s.page_size) +
             (s.latent_v ? "_latent" + std::to_string(s.latent_v) : "") +
             (s.value_dim ? "_v" + std::to_string(s.value_dim) : "") + (s.sinks ? "_sinks" : "") +
             (s.softcap > 0 ? "_softcap" + std::to_string(int(s.softcap)) : "");
    });

// MLA's latent on the tensor-core decode kernel (k 576, the value its first 512 columns, one KV
// head): V2-Lite's 16 and V3's 128 query heads, and counts that leave a head block part empty
// (20: one 32-row block with 12 padding rows; 40: a full block and one of 8). Each request's
// decode attends 1 key (its own), 63, 64 and 65 (around a 64-key tile), 16, 701 and 1100, in
// one batch, with 32 splits (most of them empty for the short requests), 3, 7 and the
// automatic count; a second decode step moves every length by one. The cache is filled by a
// one-head prefill (the CPU reference of a 128-head prefill of 1100 tokens would dominate).
struct MlaCase {
  int hq, page_size;
};

class CudaMlaDecodeVsCpu : public GpuTest<MlaCase> {};

TEST_P(CudaMlaDecodeVsCpu, LatentDecodeMatches) {
  const MlaCase c = GetParam();
  const Shape s{c.hq, 1, 576, 0, c.page_size, 512};
  // Keys each request's first decode token attends to, itself included.
  const std::vector<int> keys = {1, 63, 64, 65, 16, 701, 1100};
  const int n = int(keys.size());
  for (int splits : {32, 3, 7, 0}) {
    std::mt19937 rng(100 + splits);
    BackendPair pair(s, n, 1200);
    std::vector<int> rows(n), len(n, 0);
    for (int i = 0; i < n; ++i) rows[i] = pair.memory().req_to_token().alloc();
    ForwardBatch prefill;
    for (int i = 0; i < n; ++i)
      if (keys[i] > 1) add(prefill, pair.memory(), rows[i], 0, keys[i] - 1), len[i] = keys[i] - 1;
    EXPECT_LT(pair.run(prefill, rng, 1), 1e-2) << "one-head prefill";
    pair.gpu().set_decode_splits(splits);
    for (int step = 0; step < 2; ++step) {
      ForwardBatch decode;
      decode.mode = ForwardMode::Decode;
      for (int i = 0; i < n; ++i) add(decode, pair.memory(), rows[i], len[i], 1), len[i] += 1;
      EXPECT_LT(pair.run(decode, rng), 2e-3) << "decode step " << step << ", splits " << splits;
      EXPECT_EQ(pair.gpu().decode_kernel(), "mla_tiles");
      if (splits > 0) {
        EXPECT_EQ(pair.gpu().decode_partial_shape()[2], splits);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMlaDecodeVsCpu,
                         testing::Values(MlaCase{16, 1}, MlaCase{16, 16}, MlaCase{128, 16},
                                         MlaCase{128, 1}, MlaCase{20, 1}, MlaCase{40, 16}),
                         [](const testing::TestParamInfo<MlaCase>& info) {
                           return "hq" + std::to_string(info.param.hq) + "_page" +
                                  std::to_string(info.param.page_size);
                         });

// The one KV pool class over GPU memory: bf16 rows in device memory, zeroed, and the same
// loud refusal of layers it does not hold as on the host.
TEST(DeviceKVPool, RefusesLayersItDoesNotHold) {
  std::string why;
  if (!cuda::device_present(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  CudaOps ops(0, nullptr);
  const KVLayerLayout l{2, 64, 64, false, DType::BF16};
  KVPool pool({{5, l}, {12, l}}, 16, ops);
  EXPECT_TRUE(pool.holds(12));
  EXPECT_FALSE(pool.k_buffer(12).on_host());
  EXPECT_EQ(pool.k_buffer(12).dtype(), DType::BF16);
  EXPECT_EQ(pool.bytes(), 16u * 2 /*layers*/ * (2 * 64 + 2 * 64) * 2 /*bf16*/);
  const Tensor zeros = ops.to_host(pool.v_buffer(5));
  for (int64_t i = 0; i < zeros.numel(); ++i) ASSERT_EQ(zeros.data()[i], 0.0f);
  try {
    pool.k_buffer(0);
    FAIL() << "layer 0 is not in the pool";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds layers [5, 12]"), std::string::npos) << e.what();
  }
}

// The backend's fused path (calls that bring their rope: rotate q and k, store k and v, one
// kernel) against the two kernels it replaces, rope_2d over q | k then store_kv, on one fused
// q | k | v | spare row as the projection leaves it: q and the cache rows the same bits, k left
// unrotated. NeoX halves over whole heads, interleaved pairs over part of a head (the rest
// passes through), a cos/sin scale (YaRN's), positions far apart, slots out of order.
struct RopeStoreCase {
  int hq, hkv, head_dim, rotary_dim;
  bool interleaved;
  float scale;
};

class CudaRopeStoreKv : public GpuTest<RopeStoreCase> {};

TEST_P(CudaRopeStoreKv, SameBitsAsRopeThenStore) {
  const RopeStoreCase c = GetParam();
  const std::vector<int32_t> positions = {0, 1, 77, 1023, 40000};
  const std::vector<int32_t> slots = {9, 2, 14, 0, 6};
  const int t = int(positions.size()), slot_count = 16;
  const int qw = c.hq * c.head_dim, kw = c.hkv * c.head_dim, row = qw + 2 * kw + 3;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> qkv(size_t(t) * row), inv_freq(c.rotary_dim / 2);
  for (auto& x : qkv) x = u(rng);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(c.rotary_dim));
  const std::vector<uint16_t> zeros(size_t(slot_count) * kw, 0);
  const cuda::DeviceBuffer d_pos = cuda::to_device(positions), d_slots = cuda::to_device(slots),
                           d_freq = cuda::to_device(inv_freq);
  struct Run {
    cuda::DeviceBuffer qkv, k_cache, v_cache;
  };
  auto fresh = [&] {
    return Run{cuda::to_device(qkv), cuda::to_device(zeros), cuda::to_device(zeros)};
  };
  Run separate = fresh(), fused = fresh();
  float* sq = separate.qkv.as<float>();
  cuda::rope_2d(cuda::View{sq, row, DType::F32}, t, c.hq + c.hkv, c.head_dim, d_pos.as<int32_t>(),
                d_freq.as<float>(), c.rotary_dim, c.interleaved, c.scale, nullptr);
  cuda::store_kv(sq + qw, row, sq + qw + kw, row, d_slots.as<int32_t>(), t, kw, kw,
                 separate.k_cache.as<cuda::bf16>(), kw, separate.v_cache.as<cuda::bf16>(), kw,
                 nullptr);
  float* fq = fused.qkv.as<float>();
  const cuda::RopeArgs rope{d_pos.as<int32_t>(), d_freq.as<float>(), c.rotary_dim, c.interleaved,
                            c.scale};
  cuda::rope_store_kv(fq, row, c.hq, fq + qw, row, fq + qw + kw, row, d_slots.as<int32_t>(), t,
                      c.hkv, c.head_dim, kw, rope, fused.k_cache.as<cuda::bf16>(), kw,
                      fused.v_cache.as<cuda::bf16>(), kw, nullptr);
  STRATA_CUDA_CHECK(cudaDeviceSynchronize());
  const auto rows_of = [&](const cuda::DeviceBuffer& b) {
    return cuda::to_host<float>(b.data(), qkv.size());
  };
  const auto cache_of = [&](const cuda::DeviceBuffer& b) {
    return cuda::to_host<uint16_t>(b.data(), zeros.size());
  };
  const std::vector<float> got = rows_of(fused.qkv), want = rows_of(separate.qkv);
  for (int r = 0; r < t; ++r)
    for (int col = 0; col < row; ++col) {
      const size_t i = size_t(r) * row + col;
      // q rotated like rope_2d's; k (and everything after it) as it was.
      const float expect = col < qw ? want[i] : qkv[i];
      ASSERT_EQ(got[i], expect) << "token " << r << " column " << col;
    }
  EXPECT_EQ(cache_of(fused.k_cache), cache_of(separate.k_cache));
  EXPECT_EQ(cache_of(fused.v_cache), cache_of(separate.v_cache));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaRopeStoreKv,
                         testing::Values(RopeStoreCase{8, 2, 128, 128, false, 1.0f},
                                         RopeStoreCase{6, 2, 80, 40, true, 1.0f},
                                         RopeStoreCase{4, 1, 64, 32, false, 1.3f},
                                         RopeStoreCase{3, 3, 256, 64, true, 0.7f}),
                         [](const testing::TestParamInfo<RopeStoreCase>& info) {
                           const RopeStoreCase& c = info.param;
                           return "hq" + std::to_string(c.hq) + "_hkv" + std::to_string(c.hkv) +
                                  "_d" + std::to_string(c.head_dim) + "_rot" +
                                  std::to_string(c.rotary_dim) +
                                  (c.interleaved ? "_interleaved" : "");
                         });

}  // namespace
}  // namespace strata
