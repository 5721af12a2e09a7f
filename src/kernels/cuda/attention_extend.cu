// Paged extend attention (prefill, chunked prefill over a cached prefix) on bf16 tensor
// cores. See attention.h for the contract; the decode kernels are in attention_decode.cu.
// Heads 64 or 128 wide go to the register-tiled kernel (attention_extend_tiles.cu); this
// file's WMMA kernel takes every other layout.
#include <mma.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tiles.h"
#include "kernels/cuda/convert.cuh"

namespace strata::cuda {

namespace {

using attention_detail::kNegInf;
using attention_detail::request_slots;
using attention_detail::soft_cap;

// Block = (BM = 16 * WARPS new tokens of one request, one query head); each warp owns 16
// query rows end to end: S = Q K^T and O += P V on bf16 tensor cores (WMMA 16x16x16), the
// online softmax in f32 on its own rows. Only the K/V tile loads (BN keys) are shared by the
// block. Q, the K/V tile and O (f32) live in shared memory at the row width, so wide rows
// (MLA's 576-wide latent) take a smaller tile: 32 x 32 instead of 64 x 64. When the value is
// inside the key row the V tile is the K tile (one load, one buffer).
namespace wmma = nvcuda::wmma;

struct ExtendSmem {
  int ldh, lds, ldp, ldo;
  size_t q, k, v, s, p, o, m, l, total;
  // dp: the tile width (k and v widths rounded up to 16); dvp: the value's, rounded up to 16.
  __host__ __device__ ExtendSmem(int dp, int dvp, int bm, int bn, bool v_in_k) {
    ldh = dp + 8, lds = bn + 4, ldp = bn + 8, ldo = dvp + 4;
    auto round = [](size_t x) { return (x + 127) / 128 * 128; };
    q = 0;
    k = round(q + sizeof(bf16) * bm * ldh);
    v = round(k + sizeof(bf16) * bn * ldh);
    s = v_in_k ? v : round(v + sizeof(bf16) * bn * ldh);
    if (v_in_k) v = k;
    p = round(s + sizeof(float) * bm * lds);
    o = round(p + sizeof(bf16) * bm * ldp);
    m = round(o + sizeof(float) * bm * ldo);
    l = round(m + sizeof(float) * bm);
    total = round(l + sizeof(float) * bm);
  }
};

template <typename OutT, int WARPS, int BN>
__global__ __launch_bounds__(WARPS * 32) void extend_kernel(const float* q, DeviceKV kv,
                                                            PagedBatch batch, AttentionParams p,
                                                            int dp, bool v_in_k, OutT* out) {
  constexpr int BM = 16 * WARPS;
  extern __shared__ __align__(128) unsigned char smem[];
  const int dk = kv.k_head_dim, dv = kv.v_head_dim;
  const int dkp = (dk + 15) / 16 * 16, dvp = (dv + 15) / 16 * 16;
  const ExtendSmem layout(dp, dvp, BM, BN, v_in_k);
  bf16* Qs = reinterpret_cast<bf16*>(smem + layout.q);
  bf16* Ks = reinterpret_cast<bf16*>(smem + layout.k);
  bf16* Vs = reinterpret_cast<bf16*>(smem + layout.v);
  float* Ss = reinterpret_cast<float*>(smem + layout.s);
  bf16* Ps = reinterpret_cast<bf16*>(smem + layout.p);
  float* Os = reinterpret_cast<float*>(smem + layout.o);
  float* row_m = reinterpret_cast<float*>(smem + layout.m);
  float* row_l = reinterpret_cast<float*>(smem + layout.l);
  const int ldh = layout.ldh, lds = layout.lds, ldp = layout.ldp, ldo = layout.ldo;

  const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * BM;
  const int tok0 = batch.token_offsets[b];
  const int ext = batch.token_offsets[b + 1] - tok0;
  if (m0 >= ext) return;
  const int prefix = batch.prefix_lens[b];
  const int kv_head = h / (p.num_q_heads / kv.num_kv_heads);
  const int rows = min(BM, ext - m0);
  const int first_pos = prefix + m0, last_pos = prefix + m0 + rows - 1;
  const int kv_begin = p.sliding_window > 0 ? max(0, first_pos - p.sliding_window + 1) : 0;
  const int kv_end = last_pos + 1;
  const int32_t* req_row = request_slots(batch, b);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // Q columns past dk are zero, as are the K tile's, so S may run over dkp columns.
  for (int idx = tid; idx < BM * dkp; idx += blockDim.x) {
    const int r = idx / dkp, c = idx % dkp;
    const float x = (r < rows && c < dk)
                        ? q[static_cast<int64_t>(tok0 + m0 + r) * p.q_row_stride + h * dk + c]
                        : 0.0f;
    Qs[r * ldh + c] = __float2bfloat16_rn(x);
  }
  for (int idx = tid; idx < BM * dvp; idx += blockDim.x) Os[(idx / dvp) * ldo + idx % dvp] = 0.0f;
  for (int r = tid; r < BM; r += blockDim.x) row_m[r] = kNegInf, row_l[r] = 0.0f;

  // This lane's softmax row and half of the key columns.
  const int my_row = warp * 16 + lane / 2, half = lane % 2;
  const bool row_valid = my_row < rows;
  const int my_pos = prefix + m0 + my_row;
  // Tile columns loaded: the key's (zero past dk) and, for a separate value, the value's.
  const int chunks8 = (v_in_k ? dkp : dp) / 8;

  for (int kb = kv_begin; kb < kv_end; kb += BN) {
    __syncthreads();  // the previous tile is no longer read (and Q/O init is visible)
    for (int idx = tid; idx < BN * chunks8; idx += blockDim.x) {
      const int n = idx / chunks8, c = (idx % chunks8) * 8;
      const int kp = kb + n;
      uint4 kval = make_uint4(0, 0, 0, 0), vval = make_uint4(0, 0, 0, 0);
      if (kp < kv_end) {
        const int64_t slot = req_row[kp];
        if (c < dk)
          kval = *reinterpret_cast<const uint4*>(kv.k + slot * kv.k_row_stride + kv_head * dk + c);
        if (!v_in_k && c < dv)
          vval = *reinterpret_cast<const uint4*>(kv.v + slot * kv.v_row_stride + kv_head * dv + c);
      }
      *reinterpret_cast<uint4*>(Ks + n * ldh + c) = kval;
      if (!v_in_k) *reinterpret_cast<uint4*>(Vs + n * ldh + c) = vval;
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows.
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf[BN / 16];
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) wmma::fill_fragment(sf[j], 0.0f);
      for (int kk = 0; kk < dkp; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qa;
        wmma::load_matrix_sync(qa, Qs + warp * 16 * ldh + kk, ldh);
#pragma unroll
        for (int j = 0; j < BN / 16; ++j) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kbf;
          wmma::load_matrix_sync(kbf, Ks + j * 16 * ldh + kk, ldh);
          wmma::mma_sync(sf[j], qa, kbf, sf[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < BN / 16; ++j)
        wmma::store_matrix_sync(Ss + warp * 16 * lds + j * 16, sf[j], lds, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: two lanes per row, BN / 2 columns each.
    {
      float s[BN / 2];
      float mx = kNegInf;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) {
        const int c = half * (BN / 2) + i, kp = kb + c;
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
      for (int i = 0; i < BN / 2; ++i) {
        const float pv = s[i] == kNegInf ? 0.0f : __expf(s[i] - m_new);
        sum += pv;
        Ps[my_row * ldp + half * (BN / 2) + i] = __float2bfloat16_rn(pv);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const int half_dv = dvp / 2;
      for (int c = half * half_dv; c < (half + 1) * half_dv; ++c) Os[my_row * ldo + c] *= alpha;
      __syncwarp();
      if (half == 0) {
        row_l[my_row] = row_l[my_row] * alpha + sum;
        row_m[my_row] = m_new;
      }
    }
    __syncwarp();

    // O += P V for this warp's rows, over the value's columns only (with the value inside the
    // key row, the tile's later columns are the key's rope part; columns dv..dvp are never
    // written out).
    for (int j = 0; j < dvp; j += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
      wmma::load_matrix_sync(of, Os + warp * 16 * ldo + j, ldo, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < BN; kk += 16) {
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
    // A sink logit joins the denominator only (gpt-oss).
    const float sink = p.sinks ? p.sinks[h] : kNegInf, m = row_m[my_row];
    const float l = row_l[my_row] + (sink == kNegInf ? 0.0f
                                     : m == kNegInf  ? 1.0f
                                                     : __expf(sink - m));
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    OutT* o = out + (static_cast<int64_t>(tok0 + m0 + my_row) * p.num_q_heads + h) * dv;
    for (int c = half; c < dv; c += 2) o[c] = from_f32<OutT>(Os[my_row * ldo + c] * inv);
  }
}

// Shared memory one block may opt into on sm_90 (227 KB); kMaxExtendHeadWidth is chosen so
// that the wide tile at that width fits it even with a separate value tile.
constexpr size_t kMaxBlockSmem = 227 * 1024;

template <typename OutT, int WARPS, int BN>
void launch_extend(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                   const AttentionParams& p, int max_extend, int dp, bool v_in_k, OutT* out,
                   cudaStream_t stream) {
  constexpr int BM = 16 * WARPS;
  const ExtendSmem layout(dp, (kv.v_head_dim + 15) / 16 * 16, BM, BN, v_in_k);
  if (layout.total > kMaxBlockSmem)
    throw_error("internal error: extend attention needs " + std::to_string(layout.total) +
                " bytes of shared memory for k " + std::to_string(kv.k_head_dim) + " / v " +
                std::to_string(kv.v_head_dim));
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(extend_kernel<OutT, WARPS, BN>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(layout.total)));
  const dim3 grid((max_extend + BM - 1) / BM, p.num_q_heads, batch.batch);
  extend_kernel<OutT, WARPS, BN>
      <<<grid, WARPS * 32, layout.total, stream>>>(q, kv, batch, p, dp, v_in_k, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

template <typename OutT>
void extend_impl(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                 const AttentionParams& p_in, int max_extend, OutT* out, cudaStream_t stream,
                 int rows_per_warp) {
  if (batch.batch == 0 || max_extend == 0) return;
  attention_detail::check_shapes(kv, p_in, kMaxExtendHeadWidth, "extend");
  AttentionParams p = p_in;
  if (p.q_row_stride == 0) p.q_row_stride = static_cast<int64_t>(p.num_q_heads) * kv.k_head_dim;
  if (attention_detail::tiles_take(kv, p))
    return attention_detail::extend_tiles(
        q, kv, batch, p, max_extend, out, stream,
        rows_per_warp > 0 ? rows_per_warp : extend_rows_per_warp(max_extend, batch.batch));
  const int dp = (std::max(kv.k_head_dim, kv.v_head_dim) + 15) / 16 * 16;
  const bool v_in_k = attention_detail::value_inside_key(kv);
  // Up to 256 wide: 64 x 64 tiles (at 256 and a separate value, ~195 KB of shared memory).
  if (dp <= 256)
    launch_extend<OutT, 4, 64>(q, kv, batch, p, max_extend, dp, v_in_k, out, stream);
  else
    launch_extend<OutT, 2, 32>(q, kv, batch, p, max_extend, dp, v_in_k, out, stream);
}

}  // namespace

void extend_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, int max_extend, bf16* out, cudaStream_t stream,
                      int rows_per_warp) {
  extend_impl(q, kv, batch, p, max_extend, out, stream, rows_per_warp);
}
void extend_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, int max_extend, float* out, cudaStream_t stream,
                      int rows_per_warp) {
  extend_impl(q, kv, batch, p, max_extend, out, stream, rows_per_warp);
}

int extend_rows_per_warp(int max_extend, int batch) {
  // 32 rows a warp share each K and V fragment between two row tiles (attention_extend_tiles.cu)
  // but give half as many blocks, each holding two a SM instead of three. On the H100
  // (2026-12-07, one causal request, TFLOP/s at 16 / 32 rows a warp): 1024 tokens 108 / 110,
  // 2048 156 / 153, 4096 199 / 211, 8192 229 / 256; 8 x 1024 prefill ran 1.1% faster end to end
  // at 32. So 32 from 4096 rows of blocks on.
  return static_cast<int64_t>(max_extend) * batch >= 4096 ? 32 : 16;
}

}  // namespace strata::cuda
