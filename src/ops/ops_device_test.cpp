// CpuOps against CudaOps, op by op, in the style of llama.cpp's test-backend-ops: a table of
// cases generated from the op list at awkward sizes (1 row, odd widths, 129 / 257 rows,
// strided views, head widths 64 / 80 / 576, MoE with 8 experts top-2 and 1 / 37 tokens,
// grouped routing). Each case draws its inputs from a seeded generator, so both devices see
// the same values; the inputs are rounded to bf16 up front so that storing them in bf16 on the
// GPU loses nothing, and what is compared is what the GPU's own arithmetic changes. Error is
// measured relative to the output's scale (max |cpu - cuda| / max |cpu|). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/dummy_random.h"
#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/ops_device_cases.h"

namespace strata::ops_test {
namespace {

// One CudaOps for the whole binary (a cuBLAS handle per test would dominate the run time),
// never destroyed: destroying cuBLAS after the CUDA runtime has shut down at exit may crash.
CudaOps& cuda_ops() {
  static CudaOps* ops = [] {
    cudaStream_t s;
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return new CudaOps(0, s);
  }();
  return *ops;
}

bool skip_without_gpu(std::string* why) {
  return !cuda::device_present(why);
}

#define STRATA_SKIP_WITHOUT_GPU()                                                         \
  do {                                                                                    \
    std::string why_;                                                                     \
    if (skip_without_gpu(&why_)) GTEST_SKIP() << "no GPU, CUDA ops not tested: " << why_; \
  } while (0)

class OpsDevice : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { STRATA_SKIP_WITHOUT_GPU(); }
};

TEST_P(OpsDevice, MatchesCpu) {
  const Case& c = GetParam();
  auto cpu = make_cpu_ops();
  Rng cpu_rng{c.seed}, gpu_rng{c.seed};
  const std::vector<Tensor> want = c.run(*cpu, cpu_rng);
  CudaOps& gpu = cuda_ops();
  gpu.begin_pass();
  const std::vector<Tensor> got = c.run(gpu, gpu_rng);
  gpu.end_pass();
  ASSERT_EQ(want.size(), got.size());
  if (c.compare) return c.compare(want, got);
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(want[i], got[i], c.tol, c.name + " output " + std::to_string(i));
}

INSTANTIATE_TEST_SUITE_P(Cases, OpsDevice, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Dummy weights: the same expression on both devices; CUDA stores it in bf16.
TEST(OpsDeviceDummy, FillDummyMatchesCpuWithinBf16Rounding) {
  STRATA_SKIP_WITHOUT_GPU();
  auto cpu = make_cpu_ops();
  CudaOps& gpu = cuda_ops();
  for (const int64_t n : {int64_t{1}, int64_t{257}, int64_t{1} << 20}) {
    const uint64_t stream = dummy_stream(7, "model.layers.0.mlp.down_proj.weight");
    Tensor want = cpu->empty({n});
    cpu->fill_dummy(want, stream, 0.02f);
    Tensor dev = gpu.allocate({n}, DType::BF16);
    gpu.fill_dummy(dev, stream, 0.02f);
    Tensor dev_f32 = gpu.allocate({n}, DType::F32);
    gpu.fill_dummy(dev_f32, stream, 0.02f);
    const Tensor got = gpu.to_host(dev), got_f32 = gpu.to_host(dev_f32);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got.data()[i], bf16_to_f32(f32_to_bf16(want.data()[i]))) << "element " << i;
      ASSERT_EQ(got_f32.data()[i], want.data()[i]) << "element " << i;
    }
  }
}

// The arena: the same calls get the same addresses pass after pass; a pass that overflows
// still works, and the next begin_pass grows the arena and says so.
TEST(OpsDeviceArena, StableAddressesAndGrowth) {
  STRATA_SKIP_WITHOUT_GPU();
  cudaStream_t stream;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    CudaOps ops(0, stream, size_t{1} << 20);
    const Tensor weight = ops.empty({1000});  // outside a pass: persistent
    ops.begin_pass();
    EXPECT_FALSE(ops.grew());
    const uint64_t gen0 = ops.arena_generation();
    Tensor a = ops.empty({10, 10}), b = ops.empty({3}, DType::BF16);
    ops.begin_pass();
    // The same requests with the same lifetimes get the same blocks (first fit, in order).
    const Tensor a_again = ops.empty({10, 10}), b_again = ops.empty({3}, DType::BF16);
    EXPECT_EQ(a_again.raw(), a.raw());
    EXPECT_EQ(b_again.raw(), b.raw());
    EXPECT_NE(weight.raw(), a.raw());
    // A pass's inputs go into workspace tensors with write().
    Tensor host_ids({3}, DType::I32);
    for (int i = 0; i < 3; ++i) host_ids.ptr<int32_t>()[i] = 40 + i;
    Tensor ids = ops.empty({3}, DType::I32);
    ops.write(host_ids, ids);
    EXPECT_EQ(ops.to_host(ids).ptr<int32_t>()[2], 42);
    // 8 MiB in a 1 MiB arena: served from an overflow allocation, usable at once.
    Tensor big = ops.empty({int64_t{2} << 20});
    ops.fill(big, 1.5f);
    EXPECT_EQ(ops.to_host(big.slice_rows(0, 4)).data()[3], 1.5f);
    ops.begin_pass();
    EXPECT_TRUE(ops.grew());
    EXPECT_EQ(ops.arena_generation(), gen0 + 1);
    EXPECT_GE(ops.arena_capacity(), size_t{8} << 20);
    const void* a2 = ops.empty({10, 10}).raw();
    const void* big2 = ops.empty({int64_t{2} << 20}).raw();
    ops.begin_pass();
    EXPECT_FALSE(ops.grew());
    EXPECT_EQ(ops.empty({10, 10}).raw(), a2);
    EXPECT_EQ(ops.empty({int64_t{2} << 20}).raw(), big2);
    ops.end_pass();
  }
  STRATA_CUDA_CHECK(cudaStreamDestroy(stream));
}

// Inside a stream capture the arena must not allocate: an overflow fails with a message
// instead of a cudaMalloc that would invalidate the capture.
TEST(OpsDeviceArena, NoAllocationWhileCapturing) {
  STRATA_SKIP_WITHOUT_GPU();
  cudaStream_t stream;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    CudaOps ops(0, stream, size_t{1} << 20);
    ops.begin_pass();
    STRATA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Tensor small = ops.empty({64});
    ops.fill(small, 2.0f);
    EXPECT_THROW(ops.empty({int64_t{1} << 20}), Error);
    cudaGraph_t graph = nullptr;
    STRATA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    STRATA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    EXPECT_EQ(ops.to_host(small).data()[63], 2.0f);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  STRATA_CUDA_CHECK(cudaStreamDestroy(stream));
}

// An MoE block (router GEMM, route, experts) captured once and replayed equals eager
// execution: none of the ops reads the device on the host or allocates.
TEST(OpsDeviceArena, CapturedMoeReplaysEager) {
  STRATA_SKIP_WITHOUT_GPU();
  cudaStream_t stream;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    CudaOps ops(0, stream);
    Rng rng{99};
    const int64_t t = 5, hidden = 64, inter = 48;
    const int e = 8;
    const Tensor x = ops.upload(random({t, hidden}, rng), DType::F32);
    const Tensor gate = ops.upload(random({e, hidden}, rng, 0.2f), DType::BF16);
    ExpertWeights w;
    w.num_experts = e, w.hidden = hidden, w.intermediate = inter;
    w.w_in = ops.upload(random({e * 2 * inter, hidden}, rng, 0.1f), DType::BF16);
    w.w_down = ops.upload(random({e * hidden, inter}, rng, 0.1f), DType::BF16);
    RouterConfig cfg;
    cfg.num_experts = e, cfg.top_k = 2;
    const auto pass = [&] {
      ops.begin_pass();
      Tensor out = ops.zeros({t, hidden});
      const Tensor logits = ops.linear(x, gate);
      Tensor ids = ops.empty({t, 2}, DType::I32), weights = ops.empty({t, 2});
      ops.route(cfg, logits, nullptr, ids, weights);
      ops.experts(w, x, ids, weights, out);
      return out;
    };
    const Tensor eager = ops.to_host(pass());
    STRATA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const Tensor captured_out = pass();
    cudaGraph_t graph = nullptr;
    STRATA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    Tensor scribble = captured_out;
    ops.fill(scribble, -7.0f);
    STRATA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    const Tensor replayed = ops.to_host(captured_out);
    for (int64_t i = 0; i < eager.numel(); ++i)
      ASSERT_EQ(eager.data()[i], replayed.data()[i]) << "element " << i;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  STRATA_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace strata::ops_test
