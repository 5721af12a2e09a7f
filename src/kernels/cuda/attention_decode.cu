// Paged split-KV decode attention: stage 1 partials + log-sum-exp, stage 2 merge. See
// attention.h for the contract; the extend kernel is in attention_extend.cu.
#include <algorithm>
#include <string>
#include <string_view>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tiles.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/reduce.cuh"

namespace strata::cuda {

namespace {

using attention_detail::decode_split;
using attention_detail::kNegInf;
using attention_detail::load8;
using attention_detail::request_slots;
using attention_detail::soft_cap;

// ---------------------------------------------------------------------------------------
// Decode stage 1. Block = (request, group of GT query heads sharing one KV head, split).
// A key row is spread over LANES = DP / 8 lanes (16 bytes each), so a warp reads 32 / LANES
// keys at once; U keys per lane group are loaded before any is used, to keep loads in flight.
// Rows wider than 256 (MLA's 576-wide latent) take DP = 256 and C > 1 passes: each lane then
// holds C 16-byte chunks of the row, at columns c * 256 + sub * 8. With C = 1 the loops over
// c vanish and the code is that of the tuned narrow kernel.
constexpr int kDecodeWarps = 4;

template <int DP, int C, int GT, int kDecodeUnroll>
__global__ __launch_bounds__(kDecodeWarps *
                             32) void decode_stage1_kernel(const float* q, DeviceKV kv,
                                                           PagedBatch batch, AttentionParams p,
                                                           int num_splits, float* partial_out,
                                                           float* partial_lse) {
  constexpr int LANES = DP / 8, KPW = 32 / LANES, STEP = kDecodeWarps * KPW, W = DP * C;
  // Wide rows: the head groups of one (request, split) are neighbours in launch order, so the
  // blocks that read the same keys run together and all but the first find them in L2 (MLA:
  // every query head reads the one latent row).
  constexpr bool kHeadsFastest = C > 1;
  const int b = kHeadsFastest ? blockIdx.y : blockIdx.x;
  const int head_block = kHeadsFastest ? blockIdx.x : blockIdx.y;
  const int split = blockIdx.z;
  const int group = p.num_q_heads / kv.num_kv_heads, chunks = group / GT;
  const int kv_head = head_block / chunks;
  const int h0 = kv_head * group + (head_block % chunks) * GT;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane % LANES, kslot = lane / LANES;
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;

  const auto keys = decode_split(batch, p, b, split, num_splits);
  const int begin = keys.begin, end = keys.end;

  const int64_t t = batch.token_offsets[b];
  float qf[GT][C][8];
#pragma unroll
  for (int g = 0; g < GT; ++g)
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int d = c * DP + sub * 8 + j;
        qf[g][c][j] = d < dk ? q[t * p.q_row_stride + (h0 + g) * dk + d] * p.scale : 0.0f;
      }
  float m[GT], l[GT], acc[GT][C][8];
#pragma unroll
  for (int g = 0; g < GT; ++g) {
    m[g] = kNegInf;
    l[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][c][j] = 0.0f;
  }

  const int32_t* row = request_slots(batch, b);
  bool k_in[C], v_in[C];
#pragma unroll
  for (int c = 0; c < C; ++c) k_in[c] = c * DP + sub * 8 < dk, v_in[c] = c * DP + sub * 8 < dv;
  // Warp-uniform loop bounds: every lane takes part in every shuffle.
  for (int base = begin + warp * KPW; base < end; base += kDecodeUnroll * STEP) {
    float kr[kDecodeUnroll][C][8], vr[kDecodeUnroll][C][8];
    bool valid[kDecodeUnroll];
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
      const int kp = base + kslot + u * STEP;
      valid[u] = kp < end;
      const int64_t slot = valid[u] ? row[kp] : 0;
      const bf16* krow = kv.k + slot * kv.k_row_stride + kv_head * dk + sub * 8;
      const bf16* vrow = kv.v + slot * kv.v_row_stride + kv_head * dv + sub * 8;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        load8(krow + c * DP, valid[u] && k_in[c], kr[u][c]);
        load8(vrow + c * DP, valid[u] && v_in[c], vr[u][c]);
      }
    }
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      float s[kDecodeUnroll];
      float chunk_max = kNegInf;
#pragma unroll
      for (int u = 0; u < kDecodeUnroll; ++u) {
        float d = 0.0f;
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
          for (int j = 0; j < 8; ++j) d += qf[g][c][j] * kr[u][c][j];
#pragma unroll
        for (int off = LANES / 2; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
        s[u] = valid[u] ? soft_cap(d, p.softcap) : kNegInf;
        chunk_max = fmaxf(chunk_max, s[u]);
      }
      const float m_new = fmaxf(m[g], chunk_max);
      if (m_new == kNegInf) continue;
      const float corr = __expf(m[g] - m_new);
      l[g] *= corr;
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][c][j] *= corr;
#pragma unroll
      for (int u = 0; u < kDecodeUnroll; ++u) {
        const float pu = valid[u] ? __expf(s[u] - m_new) : 0.0f;
        l[g] += pu;
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[g][c][j] += pu * vr[u][c][j];
      }
      m[g] = m_new;
    }
  }

  // Merge the lane groups of the warp (they saw different keys), then the warps. With
  // LANES = 32 (DP = 256) a warp holds one key group and this loop is empty.
#pragma unroll
  for (int off = LANES; off < 32; off <<= 1) {
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      const float om = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float ol = __shfl_xor_sync(0xffffffffu, l[g], off);
      float oacc[C][8];
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int j = 0; j < 8; ++j) oacc[c][j] = __shfl_xor_sync(0xffffffffu, acc[g][c][j], off);
      const float m_new = fmaxf(m[g], om);
      if (m_new == kNegInf) continue;
      const float a = __expf(m[g] - m_new), cc = __expf(om - m_new);
      l[g] = l[g] * a + ol * cc;
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][c][j] = acc[g][c][j] * a + oacc[c][j] * cc;
      m[g] = m_new;
    }
  }
  __shared__ float s_m[kDecodeWarps][GT], s_l[kDecodeWarps][GT], s_acc[kDecodeWarps][GT][W];
  if (kslot == 0) {
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      if (sub == 0) s_m[warp][g] = m[g], s_l[warp][g] = l[g];
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int j = 0; j < 8; ++j) s_acc[warp][g][c * DP + sub * 8 + j] = acc[g][c][j];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < GT * dv; idx += blockDim.x) {
    const int g = idx / dv, d = idx % dv;
    float mx = kNegInf;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, s_m[w][g]);
    const int64_t part = (static_cast<int64_t>(b) * p.num_q_heads + h0 + g) * num_splits + split;
    if (mx == kNegInf) {  // an empty split: it must not count in the merge
      partial_out[part * dv + d] = 0.0f;
      if (d == 0) partial_lse[part] = kNegInf;
      continue;
    }
    float sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float e = __expf(s_m[w][g] - mx);
      sum += s_l[w][g] * e;
      o += s_acc[w][g][d] * e;
    }
    partial_out[part * dv + d] = o / sum;
    if (d == 0) partial_lse[part] = mx + logf(sum);
  }
}

// Decode stage 2: out = sum_i e^{lse_i - M} o_i / (e^{sink - M} + sum_i e^{lse_i - M}), the
// sink term only with sinks (a logit with no value: it takes weight from every key). Block =
// (request, head). The first warp turns the splits' log-sum-exps into weights (lane i: split
// i), so the loads of the partial outputs that follow are independent of each other: a loop
// that read each lse before its partial waited on a memory round trip per split, which at
// batch 1 (18 splits) took 10 us a layer.
static_assert(kMaxDecodeSplits <= 32, "stage 2 holds one split per lane of a warp");
template <typename OutT>
__global__ void decode_stage2_kernel(const float* partial_out, const float* partial_lse,
                                     int num_q_heads, int dv, int num_splits,
                                     const int32_t* token_offsets, const float* sinks, OutT* out) {
  __shared__ float weight[kMaxDecodeSplits];
  const int b = blockIdx.x, h = blockIdx.y;
  const int64_t first = (static_cast<int64_t>(b) * num_q_heads + h) * num_splits;
  if (threadIdx.x < 32) {
    const int i = threadIdx.x;
    const float lse = i < num_splits ? partial_lse[first + i] : kNegInf;
    const float sink = sinks ? sinks[h] : kNegInf;
    const float mx = fmaxf(warp_max(lse), sink);
    const float w = lse == kNegInf ? 0.0f : __expf(lse - mx);
    const float total = warp_sum(w) + (sink == kNegInf ? 0.0f : __expf(sink - mx));
    if (i < num_splits) weight[i] = total > 0.0f ? w / total : 0.0f;
  }
  __syncthreads();
  OutT* o = out + (static_cast<int64_t>(token_offsets[b]) * num_q_heads + h) * dv;
  for (int d = threadIdx.x; d < dv; d += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 4
    for (int i = 0; i < num_splits; ++i) acc += weight[i] * partial_out[(first + i) * dv + d];
    o[d] = from_f32<OutT>(acc);
  }
}

template <int DP, int C, int GT, int U>
void launch_stage1(dim3 grid, const float* q, const DeviceKV& kv, const PagedBatch& batch,
                   const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  decode_stage1_kernel<DP, C, GT, U><<<grid, kDecodeWarps * 32, 0, stream>>>(
      q, kv, batch, p, ws.num_splits, ws.partial_out, ws.partial_lse);
  STRATA_CUDA_CHECK_LAUNCH();
}

template <int DP, int U>
void launch_stage1_dp(int gt, dim3 grid, const float* q, const DeviceKV& kv,
                      const PagedBatch& batch, const AttentionParams& p, const DecodeWorkspace& ws,
                      cudaStream_t stream) {
  switch (gt) {
    case 8:
      return launch_stage1<DP, 1, 8, U>(grid, q, kv, batch, p, ws, stream);
    case 4:
      return launch_stage1<DP, 1, 4, U>(grid, q, kv, batch, p, ws, stream);
    case 2:
      return launch_stage1<DP, 1, 2, U>(grid, q, kv, batch, p, ws, stream);
    default:
      return launch_stage1<DP, 1, 1, U>(grid, q, kv, batch, p, ws, stream);
  }
}

// Rows wider than 256: C passes of a full warp per key. Two query heads per block at most
// (each lane holds 8 * C query and accumulator values per head; more would spill), and one
// key in flight per lane; the head groups go first in the grid (see the kernel).
template <int C>
void launch_stage1_wide(int group, const float* q, const DeviceKV& kv, const PagedBatch& batch,
                        const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  constexpr int kMaxGroup = C <= 3 ? 2 : 1;
  const int gt = kMaxGroup == 2 && group % 2 == 0 ? 2 : 1;
  const dim3 grid(kv.num_kv_heads * (group / gt), batch.batch, ws.num_splits);
  if (gt == 2)
    launch_stage1<256, C, kMaxGroup, 1>(grid, q, kv, batch, p, ws, stream);
  else
    launch_stage1<256, C, 1, 1>(grid, q, kv, batch, p, ws, stream);
}

// Stage 1 on CUDA cores: a key row spread over lanes, for every layout.
void decode_lanes_stage1(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                         const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  const int group = p.num_q_heads / kv.num_kv_heads;
  const int gt = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const dim3 grid(batch.batch, kv.num_kv_heads * (group / gt), ws.num_splits);
  const int width = std::max(kv.k_head_dim, kv.v_head_dim);
  // Keys loaded ahead per lane group: tuned on the H200 for 128-wide heads (the bench
  // sweeps it, see docs/benchmarks-cuda.md); wider heads keep fewer to save registers.
  const int unroll = ws.unroll > 0 ? ws.unroll : kDefaultDecodeUnroll;
  if (width <= 32)
    launch_stage1_dp<32, 2>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 64)
    launch_stage1_dp<64, 2>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 128 && unroll == 1)
    launch_stage1_dp<128, 1>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 128 && unroll == 2)
    launch_stage1_dp<128, 2>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 128 && unroll == 8)
    launch_stage1_dp<128, 8>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 128 && unroll == 4)
    launch_stage1_dp<128, 4>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 128)
    launch_stage1_dp<128, 2>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 256)
    launch_stage1_dp<256, 2>(gt, grid, q, kv, batch, p, ws, stream);
  else if (width <= 512)
    launch_stage1_wide<2>(group, q, kv, batch, p, ws, stream);
  else if (width <= 768)
    launch_stage1_wide<3>(group, q, kv, batch, p, ws, stream);
  else
    launch_stage1_wide<4>(group, q, kv, batch, p, ws, stream);
}

template <typename OutT>
void decode_impl(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                 const AttentionParams& p_in, const DecodeWorkspace& ws, OutT* out,
                 cudaStream_t stream) {
  if (batch.batch == 0) return;
  attention_detail::check_shapes(kv, p_in, kMaxDecodeHeadWidth, "decode");
  AttentionParams p = p_in;
  if (p.q_row_stride == 0) p.q_row_stride = static_cast<int64_t>(p.num_q_heads) * kv.k_head_dim;
  if (ws.num_splits < 1 || ws.num_splits > kMaxDecodeSplits)
    throw_error("internal error: " + std::to_string(ws.num_splits) + " decode splits");
  const std::string_view kernel = decode_kernel_name(kv, batch, p, ws);
  if (kernel == "mla_tiles")
    attention_detail::decode_mla_stage1(q, kv, batch, p, ws, stream);
  else if (kernel == "tiles")
    attention_detail::decode_tiles_stage1(q, kv, batch, p, ws, stream);
  else
    decode_lanes_stage1(q, kv, batch, p, ws, stream);
  decode_stage2_kernel<OutT><<<dim3(batch.batch, p.num_q_heads), 128, 0, stream>>>(
      ws.partial_out, ws.partial_lse, p.num_q_heads, kv.v_head_dim, ws.num_splits,
      batch.token_offsets, p.sinks, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

const char* decode_kernel_name(const DeviceKV& kv, const PagedBatch& batch,
                               const AttentionParams& p_in, const DecodeWorkspace& ws) {
  AttentionParams p = p_in;
  if (p.q_row_stride == 0) p.q_row_stride = static_cast<int64_t>(p.num_q_heads) * kv.k_head_dim;
  // A load depth asks for the lane kernel even where a tensor-core one applies (the bench's
  // side-by-side runs).
  if (ws.unroll > 0) return "lanes";
  if (attention_detail::mla_tiles_take(kv, p, batch)) return "mla_tiles";
  if (attention_detail::tiles_take(kv, p)) return "tiles";
  return "lanes";
}

int default_decode_blocks_per_sm(int num_kv_heads, int k_head_dim, int v_head_dim, bool v_in_k) {
  const bool mla_latent = num_kv_heads == 1 && k_head_dim == 576 && v_head_dim == 512 && v_in_k;
  if (mla_latent) return kDefaultMlaDecodeBlocksPerSm;
  const bool tiles_d128 = k_head_dim == 128 && v_head_dim == 128 && !v_in_k;
  return tiles_d128 ? kDefaultTilesD128DecodeBlocksPerSm : kDefaultDecodeBlocksPerSm;
}

int choose_decode_splits(int batch, int num_kv_heads, int max_seq_len, int num_sms,
                         int blocks_per_sm) {
  constexpr int kMinKeysPerSplit = 64;
  const int blocks = std::max(1, batch * num_kv_heads);
  const int target = std::max(blocks_per_sm, 1) * num_sms;
  const int for_occupancy = (target + blocks - 1) / blocks;
  const int for_length = (max_seq_len + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  return std::clamp(std::min(for_occupancy, for_length), 1, kMaxDecodeSplits);
}

void decode_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, const DecodeWorkspace& ws, bf16* out,
                      cudaStream_t stream) {
  decode_impl(q, kv, batch, p, ws, out, stream);
}
void decode_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, const DecodeWorkspace& ws, float* out,
                      cudaStream_t stream) {
  decode_impl(q, kv, batch, p, ws, out, stream);
}
}  // namespace strata::cuda
