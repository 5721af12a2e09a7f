// strata_attention_bench: the split-KV decode attention kernel alone, and the GPU's copy
// bandwidth (the ceiling it is judged against), in one run. Prints one JSON object.
//   strata_attention_bench [batch=64] [context=4096] [q_heads=32] [kv_heads=8] [head_dim=128]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/tensor_ops.h"

namespace {

using namespace strata::cuda;

// Median of `iters` timed runs of `fn` after `warmup` untimed ones, in milliseconds.
template <typename Fn>
double median_ms(Fn fn, int warmup, int iters) {
  cudaEvent_t a, b;
  STRATA_CUDA_CHECK(cudaEventCreate(&a));
  STRATA_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    STRATA_CUDA_CHECK(cudaEventRecord(a));
    fn();
    STRATA_CUDA_CHECK(cudaEventRecord(b));
    STRATA_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int run(int argc, char** argv) {
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int batch = arg(1, 64), context = arg(2, 4096), hq = arg(3, 32), hkv = arg(4, 8),
            d = arg(5, 128);

  // Copy bandwidth: a 4 GiB device-to-device copy, bytes read plus bytes written.
  const size_t copy_bytes = size_t(4) << 30;
  DeviceBuffer src(copy_bytes), dst(copy_bytes);
  STRATA_CUDA_CHECK(cudaMemset(src.data(), 1, copy_bytes));
  const double copy_ms = median_ms(
      [&] {
        STRATA_CUDA_CHECK(
            cudaMemcpyAsync(dst.data(), src.data(), copy_bytes, cudaMemcpyDeviceToDevice));
      },
      3, 20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;

  // A paged cache holding every request's keys, one page-16 block after another.
  const int64_t slots = int64_t(batch) * context + 1;
  const int64_t width = int64_t(hkv) * d;
  DeviceBuffer k(slots * width * 2), v(slots * width * 2);
  fill_dummy(k.data(), strata::DType::BF16, slots * width, 1, 1.0f, nullptr);
  fill_dummy(v.data(), strata::DType::BF16, slots * width, 2, 1.0f, nullptr);
  std::vector<int32_t> table(size_t(batch) * context), rows(batch), prefix(batch),
      offsets(batch + 1);
  for (int b = 0; b < batch; ++b) {
    for (int p = 0; p < context; ++p) table[size_t(b) * context + p] = 1 + b * context + p;
    rows[b] = b;
    prefix[b] = context - 1;  // the new token is the context's last position
    offsets[b] = b;
  }
  offsets[batch] = batch;
  DeviceBuffer dtable = to_device(table), drows = to_device(rows), dprefix = to_device(prefix),
               doffsets = to_device(offsets);
  DeviceBuffer q(size_t(batch) * hq * d * 4), out(size_t(batch) * hq * d * 2);
  std::vector<float> qh(size_t(batch) * hq * d, 0.05f);
  STRATA_CUDA_CHECK(cudaMemcpy(q.data(), qh.data(), qh.size() * 4, cudaMemcpyHostToDevice));

  DeviceKV kv{k.as<bf16>(), v.as<bf16>(), width, width, hkv, d, d};
  PagedBatch pb{dtable.as<int32_t>(),   context, drows.as<int32_t>(), dprefix.as<int32_t>(),
                doffsets.as<int32_t>(), batch};
  AttentionParams p;
  p.num_q_heads = hq;
  p.scale = 0.088f;
  int sms = 0;
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The shipped choice first, then a sweep of split targets and load depths.
  DeviceBuffer partial(size_t(batch) * hq * kMaxDecodeSplits * d * 4),
      lse(size_t(batch) * hq * kMaxDecodeSplits * 4);
  const double kv_bytes = double(batch) * context * width * 2 /*k and v*/ * 2 /*bf16*/;
  auto measure = [&](int blocks_per_sm, int unroll, bool shipped) {
    const int splits = choose_decode_splits(batch, hkv, context, sms, blocks_per_sm);
    DecodeWorkspace ws{partial.as<float>(), lse.as<float>(), splits, unroll};
    const double ms = median_ms(
        [&] { decode_attention(q.as<float>(), kv, pb, p, ws, out.as<bf16>(), nullptr); }, 5, 50);
    const double gbs = kv_bytes / (ms * 1e-3) / 1e9;
    std::printf(
        "{\"shipped\": %s, \"batch\": %d, \"context\": %d, \"q_heads\": %d, \"kv_heads\": %d, "
        "\"head_dim\": %d, "
        "\"blocks_per_sm\": %d, \"unroll\": %d, \"splits\": %d, \"kv_bytes\": %.0f, \"median_ms\": "
        "%.4f, "
        "\"achieved_GBps\": %.1f, \"copy_GBps\": %.1f, \"fraction_of_copy\": %.3f}\n",
        shipped ? "true" : "false", batch, context, hq, hkv, d, blocks_per_sm, unroll, splits,
        kv_bytes, ms, gbs, copy_gbs, gbs / copy_gbs);
  };
  measure(0, 0, true);
  for (int blocks_per_sm : {2, 4, 8, 16})
    for (int unroll : {1, 2, 4}) measure(blocks_per_sm, unroll, false);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
