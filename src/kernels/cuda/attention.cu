// Paged attention kernels: split-KV decode (stage 1 partials + log-sum-exp, stage 2 merge)
// and tensor-core extend. See attention.h for the contracts.
#include <mma.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"

namespace strata::cuda {

namespace {

constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ void load8(const bf16* p, bool in_range, float (&out)[8]) {
  if (!in_range) {
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = 0.0f;
    return;
  }
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

__device__ __forceinline__ float soft_cap(float s, float cap) {
  return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

// ---------------------------------------------------------------------------------------
// Decode stage 1. Block = (request, group of GT query heads sharing one KV head, split).
// A key row is spread over LANES = DP / 8 lanes (16 bytes each), so a warp reads 32 / LANES
// keys at once; U keys per lane group are loaded before any is used, to keep loads in flight.
constexpr int kDecodeWarps = 4;

template <int DP, int GT, int kDecodeUnroll>
__global__ __launch_bounds__(kDecodeWarps *
                             32) void decode_stage1_kernel(const float* q, DeviceKV kv,
                                                           PagedBatch batch, AttentionParams p,
                                                           int num_splits, float* partial_out,
                                                           float* partial_lse) {
  constexpr int LANES = DP / 8, KPW = 32 / LANES, STEP = kDecodeWarps * KPW;
  const int b = blockIdx.x, split = blockIdx.z;
  const int group = p.num_q_heads / kv.num_kv_heads, chunks = group / GT;
  const int kv_head = blockIdx.y / chunks;
  const int h0 = kv_head * group + (blockIdx.y % chunks) * GT;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane % LANES, kslot = lane / LANES;
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;

  const int pos = batch.prefix_lens[b];  // the new token; its key is already in the cache
  const int lo = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0, hi = pos + 1;
  const int chunk = (hi - lo + num_splits - 1) / num_splits;
  const int begin = min(hi, lo + split * chunk), end = min(hi, begin + chunk);

  const int64_t t = batch.token_offsets[b];
  float qf[GT][8];
#pragma unroll
  for (int g = 0; g < GT; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int d = sub * 8 + j;
      qf[g][j] = d < dk ? q[t * p.q_row_stride + (h0 + g) * dk + d] * p.scale : 0.0f;
    }
  float m[GT], l[GT], acc[GT][8];
#pragma unroll
  for (int g = 0; g < GT; ++g) {
    m[g] = kNegInf;
    l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.0f;
  }

  const int32_t* row = batch.req_to_token +
                       static_cast<int64_t>(batch.req_pool_indices[b]) * batch.req_to_token_stride;
  const bool k_in = sub * 8 < dk, v_in = sub * 8 < dv;
  // Warp-uniform loop bounds: every lane takes part in every shuffle.
  for (int base = begin + warp * KPW; base < end; base += kDecodeUnroll * STEP) {
    float kr[kDecodeUnroll][8], vr[kDecodeUnroll][8];
    bool valid[kDecodeUnroll];
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
      const int kp = base + kslot + u * STEP;
      valid[u] = kp < end;
      const int64_t slot = valid[u] ? row[kp] : 0;
      load8(kv.k + slot * kv.k_row_stride + kv_head * dk + sub * 8, valid[u] && k_in, kr[u]);
      load8(kv.v + slot * kv.v_row_stride + kv_head * dv + sub * 8, valid[u] && v_in, vr[u]);
    }
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      float s[kDecodeUnroll];
      float chunk_max = kNegInf;
#pragma unroll
      for (int u = 0; u < kDecodeUnroll; ++u) {
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) d += qf[g][j] * kr[u][j];
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
      for (int j = 0; j < 8; ++j) acc[g][j] *= corr;
#pragma unroll
      for (int u = 0; u < kDecodeUnroll; ++u) {
        const float pu = valid[u] ? __expf(s[u] - m_new) : 0.0f;
        l[g] += pu;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] += pu * vr[u][j];
      }
      m[g] = m_new;
    }
  }

  // Merge the lane groups of the warp (they saw different keys), then the warps.
#pragma unroll
  for (int off = LANES; off < 32; off <<= 1) {
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      const float om = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float ol = __shfl_xor_sync(0xffffffffu, l[g], off);
      float oacc[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) oacc[j] = __shfl_xor_sync(0xffffffffu, acc[g][j], off);
      const float m_new = fmaxf(m[g], om);
      if (m_new == kNegInf) continue;
      const float a = __expf(m[g] - m_new), c = __expf(om - m_new);
      l[g] = l[g] * a + ol * c;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] = acc[g][j] * a + oacc[j] * c;
      m[g] = m_new;
    }
  }
  __shared__ float s_m[kDecodeWarps][GT], s_l[kDecodeWarps][GT], s_acc[kDecodeWarps][GT][DP];
  if (kslot == 0) {
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      if (sub == 0) s_m[warp][g] = m[g], s_l[warp][g] = l[g];
#pragma unroll
      for (int j = 0; j < 8; ++j) s_acc[warp][g][sub * 8 + j] = acc[g][j];
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

// Decode stage 2: out = sum_i e^{lse_i - M} o_i / sum_i e^{lse_i - M}. Block = (request, head).
template <typename OutT>
__global__ void decode_stage2_kernel(const float* partial_out, const float* partial_lse,
                                     int num_q_heads, int dv, int num_splits,
                                     const int32_t* token_offsets, OutT* out) {
  const int b = blockIdx.x, h = blockIdx.y;
  const int64_t first = (static_cast<int64_t>(b) * num_q_heads + h) * num_splits;
  float mx = kNegInf;
  for (int i = 0; i < num_splits; ++i) mx = fmaxf(mx, partial_lse[first + i]);
  OutT* o = out + (static_cast<int64_t>(token_offsets[b]) * num_q_heads + h) * dv;
  for (int d = threadIdx.x; d < dv; d += blockDim.x) {
    float sum = 0.0f, acc = 0.0f;
    if (mx != kNegInf) {
      for (int i = 0; i < num_splits; ++i) {
        const float lse = partial_lse[first + i];
        if (lse == kNegInf) continue;
        const float w = __expf(lse - mx);
        sum += w;
        acc += w * partial_out[(first + i) * dv + d];
      }
    }
    o[d] = from_f32<OutT>(sum > 0.0f ? acc / sum : 0.0f);
  }
}

template <int DP, int U>
void launch_stage1_dp(int gt, dim3 grid, const float* q, const DeviceKV& kv,
                      const PagedBatch& batch, const AttentionParams& p, const DecodeWorkspace& ws,
                      cudaStream_t stream) {
  const dim3 block(kDecodeWarps * 32);
  switch (gt) {
    case 8:
      decode_stage1_kernel<DP, 8, U><<<grid, block, 0, stream>>>(q, kv, batch, p, ws.num_splits,
                                                                 ws.partial_out, ws.partial_lse);
      break;
    case 4:
      decode_stage1_kernel<DP, 4, U><<<grid, block, 0, stream>>>(q, kv, batch, p, ws.num_splits,
                                                                 ws.partial_out, ws.partial_lse);
      break;
    case 2:
      decode_stage1_kernel<DP, 2, U><<<grid, block, 0, stream>>>(q, kv, batch, p, ws.num_splits,
                                                                 ws.partial_out, ws.partial_lse);
      break;
    default:
      decode_stage1_kernel<DP, 1, U><<<grid, block, 0, stream>>>(q, kv, batch, p, ws.num_splits,
                                                                 ws.partial_out, ws.partial_lse);
      break;
  }
  STRATA_CUDA_CHECK_LAUNCH();
}

void check_shapes(const DeviceKV& kv, const AttentionParams& p) {
  if (kv.num_kv_heads <= 0 || p.num_q_heads % kv.num_kv_heads != 0)
    throw_error("cuda attention: " + std::to_string(p.num_q_heads) +
                " query heads do not group over " + std::to_string(kv.num_kv_heads) + " KV heads");
  if (kv.k_head_dim % 8 != 0 || kv.v_head_dim % 8 != 0 || kv.k_head_dim > 256 ||
      kv.v_head_dim > 256)
    throw_error(
        "cuda attention supports head widths that are multiples of 8 up to 256; this layer's cache "
        "is k " +
        std::to_string(kv.k_head_dim) + " / v " + std::to_string(kv.v_head_dim) +
        " wide: use --device cpu for this model");
}

template <typename OutT>
void decode_impl(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                 const AttentionParams& p_in, const DecodeWorkspace& ws, OutT* out,
                 cudaStream_t stream) {
  if (batch.batch == 0) return;
  check_shapes(kv, p_in);
  AttentionParams p = p_in;
  if (p.q_row_stride == 0) p.q_row_stride = static_cast<int64_t>(p.num_q_heads) * kv.k_head_dim;
  if (ws.num_splits < 1 || ws.num_splits > kMaxDecodeSplits)
    throw_error("internal error: " + std::to_string(ws.num_splits) + " decode splits");
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
  else
    launch_stage1_dp<256, 2>(gt, grid, q, kv, batch, p, ws, stream);
  decode_stage2_kernel<OutT><<<dim3(batch.batch, p.num_q_heads), 128, 0, stream>>>(
      ws.partial_out, ws.partial_lse, p.num_q_heads, kv.v_head_dim, ws.num_splits,
      batch.token_offsets, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------
// Extend. Block = (64 new tokens of one request, one query head); 4 warps, each owning 16
// query rows end to end: S = Q K^T and O += P V on bf16 tensor cores (WMMA 16x16x16), the
// online softmax in f32 on its own rows. Only the K/V tile loads are shared by the block.
namespace wmma = nvcuda::wmma;
constexpr int kBM = 64, kBN = 64, kExtendWarps = 4;

struct ExtendSmem {
  int ldh, lds, ldp, ldo;
  size_t q, k, v, s, p, o, m, l, total;
  __host__ __device__ explicit ExtendSmem(int dp) {
    ldh = dp + 8, lds = kBN + 4, ldp = kBN + 8, ldo = dp + 4;
    auto round = [](size_t x) { return (x + 127) / 128 * 128; };
    q = 0;
    k = round(q + sizeof(bf16) * kBM * ldh);
    v = round(k + sizeof(bf16) * kBN * ldh);
    s = round(v + sizeof(bf16) * kBN * ldh);
    p = round(s + sizeof(float) * kBM * lds);
    o = round(p + sizeof(bf16) * kBM * ldp);
    m = round(o + sizeof(float) * kBM * ldo);
    l = round(m + sizeof(float) * kBM);
    total = round(l + sizeof(float) * kBM);
  }
};

template <typename OutT>
__global__ __launch_bounds__(kExtendWarps *
                             32) void extend_kernel(const float* q, DeviceKV kv, PagedBatch batch,
                                                    AttentionParams p, int dp, OutT* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  const ExtendSmem layout(dp);
  bf16* Qs = reinterpret_cast<bf16*>(smem + layout.q);
  bf16* Ks = reinterpret_cast<bf16*>(smem + layout.k);
  bf16* Vs = reinterpret_cast<bf16*>(smem + layout.v);
  float* Ss = reinterpret_cast<float*>(smem + layout.s);
  bf16* Ps = reinterpret_cast<bf16*>(smem + layout.p);
  float* Os = reinterpret_cast<float*>(smem + layout.o);
  float* row_m = reinterpret_cast<float*>(smem + layout.m);
  float* row_l = reinterpret_cast<float*>(smem + layout.l);
  const int ldh = layout.ldh, lds = layout.lds, ldp = layout.ldp, ldo = layout.ldo;

  const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * kBM;
  const int tok0 = batch.token_offsets[b];
  const int ext = batch.token_offsets[b + 1] - tok0;
  if (m0 >= ext) return;
  const int prefix = batch.prefix_lens[b];
  const int kv_head = h / (p.num_q_heads / kv.num_kv_heads);
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;
  const int rows = min(kBM, ext - m0);
  const int first_pos = prefix + m0, last_pos = prefix + m0 + rows - 1;
  const int kv_begin = p.sliding_window > 0 ? max(0, first_pos - p.sliding_window + 1) : 0;
  const int kv_end = last_pos + 1;
  const int32_t* req_row = batch.req_to_token + static_cast<int64_t>(batch.req_pool_indices[b]) *
                                                    batch.req_to_token_stride;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  for (int idx = tid; idx < kBM * dp; idx += blockDim.x) {
    const int r = idx / dp, c = idx % dp;
    const float x = (r < rows && c < dk)
                        ? q[static_cast<int64_t>(tok0 + m0 + r) * p.q_row_stride + h * dk + c]
                        : 0.0f;
    Qs[r * ldh + c] = __float2bfloat16_rn(x);
    Os[r * ldo + c] = 0.0f;
  }
  for (int r = tid; r < kBM; r += blockDim.x) row_m[r] = kNegInf, row_l[r] = 0.0f;

  // This lane's softmax row and half of the key columns.
  const int my_row = warp * 16 + lane / 2, half = lane % 2;
  const bool row_valid = my_row < rows;
  const int my_pos = prefix + m0 + my_row;
  const int chunks8 = dp / 8;

  for (int kb = kv_begin; kb < kv_end; kb += kBN) {
    __syncthreads();  // the previous tile is no longer read (and Q/O init is visible)
    for (int idx = tid; idx < kBN * chunks8; idx += blockDim.x) {
      const int n = idx / chunks8, c = (idx % chunks8) * 8;
      const int kp = kb + n;
      uint4 kval = make_uint4(0, 0, 0, 0), vval = make_uint4(0, 0, 0, 0);
      if (kp < kv_end) {
        const int64_t slot = req_row[kp];
        if (c < dk)
          kval = *reinterpret_cast<const uint4*>(kv.k + slot * kv.k_row_stride + kv_head * dk + c);
        if (c < dv)
          vval = *reinterpret_cast<const uint4*>(kv.v + slot * kv.v_row_stride + kv_head * dv + c);
      }
      *reinterpret_cast<uint4*>(Ks + n * ldh + c) = kval;
      *reinterpret_cast<uint4*>(Vs + n * ldh + c) = vval;
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows.
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf[kBN / 16];
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j) wmma::fill_fragment(sf[j], 0.0f);
      for (int kk = 0; kk < dp; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qa;
        wmma::load_matrix_sync(qa, Qs + warp * 16 * ldh + kk, ldh);
#pragma unroll
        for (int j = 0; j < kBN / 16; ++j) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kbf;
          wmma::load_matrix_sync(kbf, Ks + j * 16 * ldh + kk, ldh);
          wmma::mma_sync(sf[j], qa, kbf, sf[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j)
        wmma::store_matrix_sync(Ss + warp * 16 * lds + j * 16, sf[j], lds, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: two lanes per row, 32 columns each.
    {
      float s[kBN / 2];
      float mx = kNegInf;
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) {
        const int c = half * (kBN / 2) + i, kp = kb + c;
        const bool ok = row_valid && kp < kv_end && kp <= my_pos &&
                        (p.sliding_window <= 0 || kp > my_pos - p.sliding_window);
        s[i] = ok ? soft_cap(Ss[my_row * lds + c] * p.scale, p.softcap) : kNegInf;
        mx = fmaxf(mx, s[i]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = row_m[my_row];
      const float m_new = fmaxf(m_old, mx);
      const float alpha = m_new == kNegInf ? 1.0f : __expf(m_old - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) {
        const float pv = s[i] == kNegInf ? 0.0f : __expf(s[i] - m_new);
        sum += pv;
        Ps[my_row * ldp + half * (kBN / 2) + i] = __float2bfloat16_rn(pv);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const int half_dp = dp / 2;
      for (int c = half * half_dp; c < (half + 1) * half_dp; ++c) Os[my_row * ldo + c] *= alpha;
      __syncwarp();
      if (half == 0) {
        row_l[my_row] = row_l[my_row] * alpha + sum;
        row_m[my_row] = m_new;
      }
    }
    __syncwarp();

    // O += P V for this warp's rows.
    for (int j = 0; j < dp; j += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
      wmma::load_matrix_sync(of, Os + warp * 16 * ldo + j, ldo, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBN; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vb;
        wmma::load_matrix_sync(pa, Ps + warp * 16 * ldp + kk, ldp);
        wmma::load_matrix_sync(vb, Vs + kk * ldh + j, ldh);
        wmma::mma_sync(of, pa, vb, of);
      }
      wmma::store_matrix_sync(Os + warp * 16 * ldo + j, of, ldo, wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncthreads();
  if (row_valid) {
    const float l = row_l[my_row];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    OutT* o = out + (static_cast<int64_t>(tok0 + m0 + my_row) * p.num_q_heads + h) * dv;
    for (int c = half; c < dv; c += 2) o[c] = from_f32<OutT>(Os[my_row * ldo + c] * inv);
  }
}

template <typename OutT>
void extend_impl(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                 const AttentionParams& p_in, int max_extend, OutT* out, cudaStream_t stream) {
  if (batch.batch == 0 || max_extend == 0) return;
  check_shapes(kv, p_in);
  AttentionParams p = p_in;
  if (p.q_row_stride == 0) p.q_row_stride = static_cast<int64_t>(p.num_q_heads) * kv.k_head_dim;
  const int dp = (std::max(kv.k_head_dim, kv.v_head_dim) + 15) / 16 * 16;
  const ExtendSmem layout(dp);
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(extend_kernel<OutT>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(layout.total)));
  const dim3 grid((max_extend + kBM - 1) / kBM, p.num_q_heads, batch.batch);
  extend_kernel<OutT><<<grid, kExtendWarps * 32, layout.total, stream>>>(q, kv, batch, p, dp, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

int choose_decode_splits(int batch, int num_kv_heads, int max_seq_len, int num_sms,
                         int blocks_per_sm) {
  constexpr int kMinKeysPerSplit = 64;
  const int blocks = std::max(1, batch * num_kv_heads);
  const int target = (blocks_per_sm > 0 ? blocks_per_sm : kDefaultDecodeBlocksPerSm) * num_sms;
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
void extend_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, int max_extend, bf16* out, cudaStream_t stream) {
  extend_impl(q, kv, batch, p, max_extend, out, stream);
}
void extend_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, int max_extend, float* out, cudaStream_t stream) {
  extend_impl(q, kv, batch, p, max_extend, out, stream);
}

}  // namespace strata::cuda
