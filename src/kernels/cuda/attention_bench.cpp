// strata_attention_bench: the split-KV decode attention kernel alone, and the GPU's copy
// bandwidth (the ceiling it is judged against), in one run. Prints one JSON object per line.
//   strata_attention_bench [batch=64] [context=4096] [q_heads=32] [kv_heads=8] [head_dim=128]
//                          [v_head_dim=head_dim] [v_in_k=0]
//   strata_attention_bench mla [batch=64] [context=4096]
// `mla`: DeepSeek-V2-Lite's latent cache (16 query heads over one 576-wide row whose first
// 512 columns are the value, v_in_k) — the same as `B C 16 1 576 512 1`. With v_in_k the
// value is read out of the key row, so the bytes counted are the key rows' only. The MLA runs
// also time one extend (prefill of `context` tokens for one request) on the same cache.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
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
  const bool mla = argc > 1 && std::string(argv[1]) == "mla";
  if (mla) --argc, ++argv;
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int batch = arg(1, 64), context = arg(2, 4096), hq = mla ? 16 : arg(3, 32),
            hkv = mla ? 1 : arg(4, 8), d = mla ? 576 : arg(5, 128), dv = mla ? 512 : arg(6, d);
  const bool v_in_k = mla || arg(7, 0) != 0;
  if (v_in_k && (dv > d || hkv != 1))
    throw strata::Error("v_in_k needs v_head_dim <= head_dim and one KV head");

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
  const int64_t width = int64_t(hkv) * d, v_width = v_in_k ? width : int64_t(hkv) * dv;
  DeviceBuffer k(slots * width * 2), v(v_in_k ? 0 : slots * v_width * 2);
  fill_dummy(k.data(), strata::DType::BF16, slots * width, 1, 1.0f, nullptr);
  if (!v_in_k) fill_dummy(v.data(), strata::DType::BF16, slots * v_width, 2, 1.0f, nullptr);
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
  // Room for the extend run's `context` query rows too (MLA runs).
  const size_t q_rows = mla ? std::max(batch, context) : batch;
  DeviceBuffer q(q_rows * hq * d * 4), out(q_rows * hq * dv * 2);
  std::vector<float> qh(q_rows * hq * d, 0.05f);
  STRATA_CUDA_CHECK(cudaMemcpy(q.data(), qh.data(), qh.size() * 4, cudaMemcpyHostToDevice));

  const bf16* vp = v_in_k ? k.as<bf16>() : v.as<bf16>();
  DeviceKV kv{k.as<bf16>(), vp, width, v_width, hkv, d, dv};
  PagedBatch pb{dtable.as<int32_t>(),   context, drows.as<int32_t>(), dprefix.as<int32_t>(),
                doffsets.as<int32_t>(), batch};
  AttentionParams p;
  p.num_q_heads = hq;
  p.scale = 0.088f;
  int sms = 0;
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The shipped choice first, then a sweep of split targets and load depths.
  DeviceBuffer partial(size_t(batch) * hq * kMaxDecodeSplits * dv * 4),
      lse(size_t(batch) * hq * kMaxDecodeSplits * 4);
  const double kv_bytes = double(batch) * context * (width + (v_in_k ? 0 : v_width)) * 2 /*bf16*/;
  auto measure = [&](int blocks_per_sm, int unroll, bool shipped) {
    const int splits = choose_decode_splits(batch, hkv, context, sms, blocks_per_sm);
    DecodeWorkspace ws{partial.as<float>(), lse.as<float>(), splits, unroll};
    const double ms = median_ms(
        [&] { decode_attention(q.as<float>(), kv, pb, p, ws, out.as<bf16>(), nullptr); }, 5, 50);
    const double gbs = kv_bytes / (ms * 1e-3) / 1e9;
    std::printf(
        "{\"shipped\": %s, \"batch\": %d, \"context\": %d, \"q_heads\": %d, \"kv_heads\": %d, "
        "\"head_dim\": %d, \"v_head_dim\": %d, \"v_in_k\": %s, "
        "\"blocks_per_sm\": %d, \"unroll\": %d, \"splits\": %d, \"kv_bytes\": %.0f, \"median_ms\": "
        "%.4f, "
        "\"achieved_GBps\": %.1f, \"copy_GBps\": %.1f, \"fraction_of_copy\": %.3f}\n",
        shipped ? "true" : "false", batch, context, hq, hkv, d, dv, v_in_k ? "true" : "false",
        blocks_per_sm, unroll, splits, kv_bytes, ms, gbs, copy_gbs, gbs / copy_gbs);
  };
  measure(0, 0, true);
  // The unroll depth only applies to 128-wide rows; wider ones sweep the split target alone.
  const bool narrow = std::max(d, dv) <= 128;
  for (int blocks_per_sm : {2, 4, 8, 16})
    for (int unroll : {1, 2, 4})
      if (narrow || unroll == 1) measure(blocks_per_sm, narrow ? unroll : 0, false);
  if (mla) {
    // One request's prefill of `context` tokens over the first `context` rows of the cache
    // (its keys already written, as the backend writes them before attending): causal,
    // 16 heads over the latent. FLOPs: QK^T over dk plus PV over dv, half the square.
    const std::vector<int32_t> one_offsets = {0, context}, zero = {0};
    DeviceBuffer d_one_offsets = to_device(one_offsets), d_zero = to_device(zero);
    PagedBatch prefill{dtable.as<int32_t>(),        context,
                       d_zero.as<int32_t>(),        d_zero.as<int32_t>(),
                       d_one_offsets.as<int32_t>(), 1};
    const double ms = median_ms(
        [&] { extend_attention(q.as<float>(), kv, prefill, p, context, out.as<bf16>(), nullptr); },
        2, 10);
    const double flops = 2.0 * hq * (double(context) * (context + 1) / 2) * (d + dv);
    std::printf(
        "{\"extend\": true, \"tokens\": %d, \"q_heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
        "\"v_head_dim\": %d, \"median_ms\": %.4f, \"TFLOPs\": %.1f}\n",
        context, hq, hkv, d, dv, ms, flops / (ms * 1e-3) / 1e12);
  }
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
