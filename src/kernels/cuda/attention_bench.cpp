// strata_attention_bench: the split-KV decode attention kernel alone (or the Mamba2 kernels),
// and the GPU's copy bandwidth (the ceiling it is judged against), in one run. Prints one JSON
// object per line.
//   strata_attention_bench [batch=64] [context=4096] [q_heads=32] [kv_heads=8] [head_dim=128]
//                          [v_head_dim=head_dim] [v_in_k=0]
//   strata_attention_bench mla [batch=64] [context=4096] [q_heads=16]
// `mla`: DeepSeek's latent cache (q_heads query heads over one 576-wide row whose first 512
// columns are the value, v_in_k: 16 = V2-Lite, V3 at TP 8; 128 = V3) — the same as
// `B C H 1 576 512 1`. With v_in_k the value is read out of the key row, so the bytes counted
// are the key rows' only. Each line names its stage-1 kernel ("mla_tiles", "tiles", "lanes")
// and gives TFLOP/s (QK^T over the key width plus PV over the value width, per query head):
// at 128 heads the latent decode does ~240 FLOP a byte, so it is bound by compute, not by the
// cache read. The MLA runs at 16 heads and up to 8192 tokens also time one extend (prefill of
// `context` tokens for one request) on the same cache.
//   strata_attention_bench mamba [batch=64] [prefill_batch=8] [prefill_len=4096]
//   strata_attention_bench extend [tokens=8192] [q_heads=32] [kv_heads=8] [head_dim=128]
//                                 [rows_per_warp=0]
// `extend`: the extend (prefill) kernel alone on one request's causal square, in TFLOP/s;
// rows_per_warp 16 or 32 picks the tensor-core kernel's row tiling (0: the shipped choice).
// `mamba`: Nemotron-3-Nano-30B-A3B's Mamba2 layer (64 heads of 64, 8 groups, state 128, chunk
// 128, f32 state): the one-step state update of `batch` requests, whose floor is reading and
// writing their states, and the SSD chunked scan of `prefill_batch` x `prefill_len` tokens.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/mamba.h"
#include "kernels/cuda/tensor_ops.h"
#include "ops/state_seqs.h"

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

double copy_bandwidth_gbs() {
  // A 4 GiB device-to-device copy, bytes read plus bytes written.
  const size_t copy_bytes = size_t(4) << 30;
  DeviceBuffer src(copy_bytes), dst(copy_bytes);
  STRATA_CUDA_CHECK(cudaMemset(src.data(), 1, copy_bytes));
  const double copy_ms = median_ms(
      [&] {
        STRATA_CUDA_CHECK(
            cudaMemcpyAsync(dst.data(), src.data(), copy_bytes, cudaMemcpyDeviceToDevice));
      },
      3, 20);
  return 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
}

// One request's prefill of `tokens` tokens over the first `tokens` rows of the cache in
// `table` (its keys already written, as the backend writes them before attending): causal.
// FLOPs: QK^T over dk plus PV over dv, half the square.
void time_extend(const DeviceKV& kv, const DeviceBuffer& table, int tokens,
                 const AttentionParams& p, const DeviceBuffer& q, DeviceBuffer& out,
                 int rows_per_warp = 0) {
  const std::vector<int32_t> one_offsets = {0, tokens}, zero = {0};
  DeviceBuffer d_one_offsets = to_device(one_offsets), d_zero = to_device(zero);
  PagedBatch prefill{table.as<int32_t>(),         tokens,
                     d_zero.as<int32_t>(),        d_zero.as<int32_t>(),
                     d_one_offsets.as<int32_t>(), 1};
  const double ms = median_ms(
      [&] {
        extend_attention(q.as<float>(), kv, prefill, p, tokens, out.as<bf16>(), nullptr,
                         rows_per_warp);
      },
      2, 10);
  const double flops =
      2.0 * p.num_q_heads * (double(tokens) * (tokens + 1) / 2) * (kv.k_head_dim + kv.v_head_dim);
  std::printf(
      "{\"extend\": true, \"tokens\": %d, \"q_heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
      "\"v_head_dim\": %d, \"rows_per_warp\": %d, \"median_ms\": %.4f, \"TFLOPs\": %.1f}\n",
      tokens, p.num_q_heads, kv.num_kv_heads, kv.k_head_dim, kv.v_head_dim, rows_per_warp, ms,
      flops / (ms * 1e-3) / 1e12);
}

// `extend [tokens] [q_heads] [kv_heads] [head_dim] [rows_per_warp]`: the extend kernel alone on a
// causal square (Llama-3.1-8B's heads by default), the prefill's attention.
int run_extend(int argc, char** argv) {
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int tokens = arg(1, 8192), hq = arg(2, 32), hkv = arg(3, 8), d = arg(4, 128),
            rows_per_warp = arg(5, 0);
  const int64_t width = int64_t(hkv) * d, slots = tokens + 1;
  DeviceBuffer k(slots * width * 2), v(slots * width * 2), q(int64_t(tokens) * hq * d * 4),
      out(int64_t(tokens) * hq * d * 2);
  fill_dummy(k.data(), strata::DType::BF16, slots * width, 1, 1.0f, nullptr);
  fill_dummy(v.data(), strata::DType::BF16, slots * width, 2, 1.0f, nullptr);
  fill_dummy(q.data(), strata::DType::F32, int64_t(tokens) * hq * d, 3, 1.0f, nullptr);
  std::vector<int32_t> table(tokens);
  for (int i = 0; i < tokens; ++i) table[i] = 1 + i;
  DeviceBuffer dtable = to_device(table);
  DeviceKV kv{k.as<bf16>(), v.as<bf16>(), width, width, hkv, d, d};
  AttentionParams p;
  p.num_q_heads = hq;
  p.scale = 1.0f / std::sqrt(float(d));
  time_extend(kv, dtable, tokens, p, q, out, rows_per_warp);
  return 0;
}

int run_mamba(int argc, char** argv) {
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int batch = arg(1, 64), prefill_batch = arg(2, 8), prefill_len = arg(3, 4096);
  SsmShape sh;
  sh.num_heads = 64, sh.head_dim = 64, sh.n_groups = 8, sh.state_size = 128, sh.chunk_size = 128;
  sh.dt_min = 0.0f, sh.dt_max = 1e30f;
  const int64_t inner = int64_t(sh.num_heads) * sh.head_dim,
                width = inner + 2 * int64_t(sh.n_groups) * sh.state_size,
                state = inner * sh.state_size;
  const double copy_gbs = copy_bandwidth_gbs();
  const int requests = std::max(batch, prefill_batch);
  const int64_t tokens = std::max<int64_t>(batch, int64_t(prefill_batch) * prefill_len);
  DeviceBuffer xbc(tokens * width * 4), dt(tokens * sh.num_heads * 4), y(tokens * inner * 4),
      states(requests * state * 4), params(3 * sh.num_heads * 4);
  fill_dummy(xbc.data(), strata::DType::F32, tokens * width, 1, 0.5f, nullptr);
  fill_dummy(dt.data(), strata::DType::F32, tokens * sh.num_heads, 2, 1.0f, nullptr);
  fill_dummy(states.data(), strata::DType::F32, requests * state, 3, 0.1f, nullptr);
  std::vector<float> p(3 * sh.num_heads);
  for (int h = 0; h < sh.num_heads; ++h) p[h] = -1.0f - h % 8, p[sh.num_heads + h] = 1.0f;
  STRATA_CUDA_CHECK(cudaMemcpy(params.data(), p.data(), p.size() * 4, cudaMemcpyHostToDevice));
  const float* A = params.as<float>();
  auto seqs_for = [](int n, int len) {
    std::vector<int32_t> s;
    for (int b = 0; b < n; ++b) s.insert(s.end(), {b * len, len, b, 1});
    return to_device(s);
  };
  DeviceBuffer decode_seqs = seqs_for(batch, 1),
               prefill_seqs = seqs_for(prefill_batch, prefill_len);
  auto scan = [&](const DeviceBuffer& seqs, int n, bool decode) {
    ssm_scan(xbc.as<float>(), width, dt.as<float>(), sh.num_heads, A, A + sh.num_heads,
             A + 2 * sh.num_heads, sh, seqs.as<int32_t>(), n, decode, states.data(),
             strata::DType::F32, y.as<float>(), nullptr);
  };
  const double step_ms = median_ms([&] { scan(decode_seqs, batch, true); }, 5, 50);
  const double step_bytes = double(batch) * (2.0 * state + width + inner) * 4;
  std::printf(
      "{\"kernel\": \"mamba2_state_update\", \"batch\": %d, \"heads\": %d, \"head_dim\": %d, "
      "\"groups\": %d, \"state_size\": %d, \"bytes\": %.0f, \"median_ms\": %.4f, "
      "\"achieved_GBps\": %.1f, \"copy_GBps\": %.1f, \"fraction_of_copy\": %.3f}\n",
      batch, sh.num_heads, sh.head_dim, sh.n_groups, sh.state_size, step_bytes, step_ms,
      step_bytes / (step_ms * 1e-3) / 1e9, copy_gbs,
      step_bytes / (step_ms * 1e-3) / 1e9 / copy_gbs);
  const double scan_ms = median_ms([&] { scan(prefill_seqs, prefill_batch, false); }, 1, 5);
  const double scan_tokens = double(prefill_batch) * prefill_len;
  const double scan_bytes =
      scan_tokens * (width + sh.num_heads + inner) * 4 + 2.0 * prefill_batch * state * 4;
  std::printf(
      "{\"kernel\": \"mamba2_chunked_scan\", \"requests\": %d, \"tokens_per_request\": %d, "
      "\"chunk_size\": %d, \"bytes\": %.0f, \"median_ms\": %.3f, \"tokens_per_s\": %.0f, "
      "\"achieved_GBps\": %.1f, \"fraction_of_copy\": %.3f}\n",
      prefill_batch, prefill_len, sh.chunk_size, scan_bytes, scan_ms,
      scan_tokens / (scan_ms * 1e-3), scan_bytes / (scan_ms * 1e-3) / 1e9,
      scan_bytes / (scan_ms * 1e-3) / 1e9 / copy_gbs);
  return 0;
}

int run(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "mamba") return run_mamba(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "extend") return run_extend(argc - 1, argv + 1);
  const bool mla = argc > 1 && std::string(argv[1]) == "mla";
  if (mla) --argc, ++argv;
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int batch = arg(1, 64), context = arg(2, 4096), hq = arg(3, mla ? 16 : 32),
            hkv = mla ? 1 : arg(4, 8), d = mla ? 576 : arg(5, 128), dv = mla ? 512 : arg(6, d);
  const bool v_in_k = mla || arg(7, 0) != 0;
  if (v_in_k && (dv > d || hkv != 1))
    throw strata::Error("v_in_k needs v_head_dim <= head_dim and one KV head");

  const double copy_gbs = copy_bandwidth_gbs();

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
  // Room for the extend run's `context` query rows too (MLA runs at V2-Lite's width; a
  // 128-head q of 32768 rows would take 9.6 GB).
  const bool with_extend = mla && hq <= 16 && context <= 8192;
  const size_t q_rows = with_extend ? std::max(batch, context) : batch;
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
  const double flops = 2.0 * batch * context * hq * (d + dv);
  // unroll > 0: the lane kernel at that depth; else the shipped kernel, with `stages` tiles in
  // flight when it is the tensor-core one.
  auto measure = [&](int blocks_per_sm, int unroll, bool shipped, int stages = 0,
                     int head_block = 0, int warps = 0) {
    if (blocks_per_sm == 0) blocks_per_sm = default_decode_blocks_per_sm(hkv, d, dv, v_in_k);
    const int splits = choose_decode_splits(batch, hkv, context, sms, blocks_per_sm);
    DecodeWorkspace ws{
        partial.as<float>(), lse.as<float>(), splits, unroll, stages, head_block, warps};
    const double ms = median_ms(
        [&] { decode_attention(q.as<float>(), kv, pb, p, ws, out.as<bf16>(), nullptr); }, 5, 50);
    const double gbs = kv_bytes / (ms * 1e-3) / 1e9;
    std::printf(
        "{\"kernel\": \"%s\", \"shipped\": %s, \"batch\": %d, \"context\": %d, \"q_heads\": %d, "
        "\"kv_heads\": %d, "
        "\"head_dim\": %d, \"v_head_dim\": %d, \"v_in_k\": %s, "
        "\"blocks_per_sm\": %d, \"unroll\": %d, \"tile_stages\": %d, \"tile_warps\": %d, "
        "\"mla_head_block\": %d, "
        "\"splits\": %d, \"kv_bytes\": "
        "%.0f, \"median_ms\": "
        "%.4f, "
        "\"achieved_GBps\": %.1f, \"copy_GBps\": %.1f, \"fraction_of_copy\": %.3f, "
        "\"TFLOPs\": %.1f}\n",
        decode_kernel_name(kv, pb, p, ws), shipped ? "true" : "false", batch, context, hq, hkv, d,
        dv, v_in_k ? "true" : "false", blocks_per_sm, unroll, stages, warps, head_block, splits,
        kv_bytes, ms, gbs, copy_gbs, gbs / copy_gbs, flops / (ms * 1e-3) / 1e12);
  };
  // The clocks ramp up over the first launches of a process: without this the first row (the
  // shipped one) read 77% of copy where the same configuration later in the sweep read 87%.
  {
    const int splits = choose_decode_splits(batch, hkv, context, sms,
                                            default_decode_blocks_per_sm(hkv, d, dv, v_in_k));
    const DecodeWorkspace ws{partial.as<float>(), lse.as<float>(), splits};
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
      for (int i = 0; i < 20; ++i)
        decode_attention(q.as<float>(), kv, pb, p, ws, out.as<bf16>(), nullptr);
      STRATA_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  measure(0, 0, true);
  // MLA: the CUDA-core lane kernel at the same split count, side by side with the shipped one.
  if (mla) measure(0, 1, false);
  // ... and the latent kernel on 16-head blocks where the default takes 32.
  if (mla && hq > 16) measure(0, 0, false, 0, 16);
  // The unroll depth only applies to 128-wide rows; wider ones sweep the split target alone.
  const bool narrow = std::max(d, dv) <= 128;
  if (narrow && !v_in_k)  // the tensor-core kernel's layouts: its warps and ring depth
    for (int warps : {2, 4})
      for (int blocks_per_sm : {2, 4, 8, 16})
        for (int stages : {2, 3, 4}) measure(blocks_per_sm, 0, false, stages, 0, warps);
  for (int blocks_per_sm : {2, 4, 8, 16})
    for (int unroll : {1, 2, 4})
      if (narrow || unroll == 1) measure(blocks_per_sm, narrow ? unroll : 0, false);
  if (with_extend) time_extend(kv, dtable, context, p, q, out);
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
