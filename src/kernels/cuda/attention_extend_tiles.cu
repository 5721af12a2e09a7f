// The extend attention kernel for the common head widths (64 and 128, value as wide as the
// key, in its own rows): FlashAttention-2's structure on sm_80+ tensor-core instructions.
// attention_extend.cu keeps the general WMMA kernel for every other layout (MLA's latent,
// 256-wide heads, mixed widths) and calls this one where it applies.
//
// Block = BM = 16 * MT * WARPS new tokens of one request and one query head; each warp owns
// MT 16-row tiles of query rows end to end: the scores S = Q K^T of the current key tile
// (mma.sync m16n8k16, bf16 in, f32 out), the online softmax state and O stay in its registers.
// The scores' accumulator layout is the next product's A operand layout, so P never touches
// shared memory. With MT = 2 every K and V fragment a warp loads feeds two row tiles (as
// FlashAttention-2 gives each of its 4 warps 32 rows), which on long prefills is worth the
// registers it takes: Q then waits in shared memory (scaled, rounded to bf16 once) and comes in
// by ldmatrix one 16-column step at a time. With MT = 1 the warp's Q fragments stay in
// registers (in shared memory they cost a quarter of the speed, H100 2026-12-07). Key and value
// tiles of BN keys stream through shared memory with cp.async, double-buffered: the next
// tile's loads are in flight while the current one is multiplied. Rows are padded by 16 bytes
// so the eight rows one ldmatrix reads fall in distinct banks. A warp skips the tiles its own
// rows see none of (past the causal diagonal, before the window), so the block's diagonal costs
// each warp only its share. Tiles start at multiples of BN keys whatever the block's rows, so a
// row's scores are cut into the same tiles (the same online-softmax steps, the same bits) at
// either MT, and so in whatever batch the row is.
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/attention_tiles.h"
#include "kernels/cuda/convert.cuh"

namespace strata::cuda::attention_detail {

namespace {

constexpr int kTileKeys = 64;  // BN
constexpr int kWarps = 4;

template <int D, int MT>
constexpr size_t tile_smem_bytes() {
  const size_t q_rows = MT > 1 ? 16 * MT * kWarps : 0;
  return (size_t(2 /*K, V*/) * 2 /*buffers*/ * kTileKeys + q_rows) * (D + 8) * sizeof(bf16);
}

// MT = 1: three blocks a SM (at most 168 registers), as the kernel ran before MT = 2; MT = 2
// holds two (its shared memory). Unbounded, MT = 1 takes 174 registers; held to 168 it spills
// 68 bytes, and runs 4-7% slower than the 16-row kernel before MT = 2 did (168 registers, no
// spill; H100, 2026-12-07): where the 6 registers went was not found.
template <typename OutT, int D, int MT>
__global__ __launch_bounds__(kWarps * 32, MT == 1 ? 3 : 2) void extend_tiles_kernel(
    const float* q, DeviceKV kv, PagedBatch batch, AttentionParams p, OutT* out) {
  constexpr int WARP_ROWS = 16 * MT, BM = WARP_ROWS * kWarps, BN = kTileKeys, LD = D + 8;
  constexpr int QK_STEPS = D / 16, S_TILES = BN / 8, O_TILES = D / 8, PV_STEPS = BN / 16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* const Ks = reinterpret_cast<bf16*>(smem_raw);  // [2][BN][LD]
  bf16* const Vs = Ks + 2 * BN * LD;                   // [2][BN][LD]
  bf16* const Qs = Vs + 2 * BN * LD;                   // [BM][LD], MT > 1 only

  // The causal tail (the last rows, with the most keys) is launched first so the short blocks
  // fill the GPU's last wave instead of the long ones.
  const int b = blockIdx.z, h = blockIdx.y, m0 = (gridDim.x - 1 - blockIdx.x) * BM;
  const int tok0 = batch.token_offsets[b];
  const int ext = batch.token_offsets[b + 1] - tok0;
  if (m0 >= ext) return;
  const int prefix = batch.prefix_lens[b];
  const int kv_head = h / (p.num_q_heads / kv.num_kv_heads);
  const int rows = min(BM, ext - m0);
  const int first_pos = prefix + m0, last_pos = prefix + m0 + rows - 1;
  const int window = p.sliding_window;
  // The first tile holding a key of the block's first row's window, at a multiple of BN.
  const int kv_begin = window > 0 ? max(0, first_pos - window + 1) / BN * BN : 0;
  const int kv_end = last_pos + 1;
  const int32_t* req_row = request_slots(batch, b);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;  // the mma fragment's row group and column pair

  // The tile of keys [kb, kb + BN) into buffer `buf`; keys past kv_end read as zeros (their
  // scores are masked, and a zero value row keeps 0 * garbage out of O).
  auto load_tile = [&](int kb, int buf) {
    constexpr int CHUNKS = D / 8;
    for (int idx = threadIdx.x; idx < BN * CHUNKS; idx += kWarps * 32) {
      const int n = idx / CHUNKS, c = (idx % CHUNKS) * 8, kp = kb + n;
      const bool ok = kp < kv_end;
      const int64_t slot = ok ? req_row[kp] : 0;
      cp_async16(Ks + (buf * BN + n) * LD + c, kv.k + slot * kv.k_row_stride + kv_head * D + c, ok);
      cp_async16(Vs + (buf * BN + n) * LD + c, kv.v + slot * kv.v_row_stride + kv_head * D + c, ok);
    }
    cp_async_commit();
  };
  load_tile(kv_begin, 0);

  // Q rows, scaled so that exp2 gives the softmax (with a soft cap the scale must come before
  // the tanh, the log2(e) after it), rounded to bf16; zeros past the last row. MT = 1: this
  // warp's fragments, in registers; else the block's rows into shared memory, whose stores the
  // first tile's barrier orders before any warp's ldmatrix.
  const bool capped = p.softcap > 0.0f;
  const float q_scale = capped ? p.scale : p.scale * kLog2e;
  // This warp's rows: [w0, w0 + WARP_ROWS) of the block; row tile mt holds w0 + 16 mt + g and
  // that + 8. A warp past the last row only helps load.
  const int w0 = warp * WARP_ROWS;
  uint32_t qf[MT == 1 ? QK_STEPS : 1][4];
  if constexpr (MT == 1) {
    const int r0 = w0 + g, r1 = r0 + 8;
    const float* q0 = q + static_cast<int64_t>(tok0 + m0 + r0) * p.q_row_stride + h * D;
    const float* q1 = q + static_cast<int64_t>(tok0 + m0 + r1) * p.q_row_stride + h * D;
    load_q_fragments(q0, r0 < rows, q1, r1 < rows, t, q_scale, qf);
  } else {
    for (int idx = threadIdx.x; idx < BM * (D / 2); idx += kWarps * 32) {
      const int r = idx / (D / 2), c = (idx % (D / 2)) * 2;
      const float2 v =
          r < rows ? *reinterpret_cast<const float2*>(
                         q + static_cast<int64_t>(tok0 + m0 + r) * p.q_row_stride + h * D + c)
                   : make_float2(0.0f, 0.0f);
      *reinterpret_cast<uint32_t*>(Qs + r * LD + c) = pack_bf16(v.x * q_scale, v.y * q_scale);
    }
  }
  const bool active = w0 < rows;
  const int w_first = first_pos + w0, w_last = first_pos + min(rows, w0 + WARP_ROWS) - 1;
  int pos[MT][2];  // this lane's rows' positions
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) pos[mt][0] = w_first + 16 * mt + g, pos[mt][1] = pos[mt][0] + 8;

  float o[MT][O_TILES][4];
  float row_max[MT][2], row_sum[MT][2];  // this lane's part
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int j = 0; j < O_TILES; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
    row_max[mt][0] = row_max[mt][1] = kNegInf;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }

  const int n_tiles = (kv_end - kv_begin + BN - 1) / BN;
  for (int it = 0; it < n_tiles; ++it) {
    const int kb = kv_begin + it * BN, buf = it & 1;
    if (it + 1 < n_tiles) {
      load_tile(kb + BN, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const bf16* Kt = Ks + buf * BN * LD;
    const bf16* Vt = Vs + buf * BN * LD;
    // Keys past this warp's last row (causal) or wholly before its first row's window add
    // nothing to its rows (the online softmax would scale by 1 and add zeros).
    // (With MT = 1 the block's 64 rows are one tile high and the test costs more registers than
    // it saves.)
    const bool seen =
        MT == 1 || (active && kb <= w_last && (window <= 0 || kb + BN - 1 > w_first - window));
    if (seen) {
      // S = Q K^T: K's rows are keys, i.e. the B operand already in column-major form; each
      // K fragment serves the warp's MT row tiles.
      float s[MT][S_TILES][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < S_TILES; ++j)
          s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < QK_STEPS; ++ks) {
        uint32_t qa[MT][4];
        if constexpr (MT == 1) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qa[0][i] = qf[ks][i];
        } else {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            ldmatrix_x4(qa[mt], Qs + (w0 + 16 * mt + lane % 16) * LD + ks * 16 + (lane / 16) * 8);
        }
#pragma unroll
        for (int j = 0; j < S_TILES; j += 2) {
          const int mat = lane / 8;
          uint32_t kf[4];
          ldmatrix_x4(kf, Kt + ((j + mat / 2) * 8 + lane % 8) * LD + ks * 16 + (mat % 2) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(s[mt][j], qa[mt], kf[0], kf[1]);
            mma_bf16(s[mt][j + 1], qa[mt], kf[2], kf[3]);
          }
        }
      }

      if (capped) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < S_TILES; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) s[mt][j][i] = soft_cap(s[mt][j][i], p.softcap) * kLog2e;
      }
      // Only tiles crossing this warp's diagonal, its window's edge or the end need the mask.
      const bool full =
          kb + BN - 1 <= w_first && kb + BN <= kv_end && (window <= 0 || kb > w_last - window);
      if (!full) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < S_TILES; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int key = kb + j * 8 + 2 * t + (i & 1), my = pos[mt][i / 2];
              const bool ok = key < kv_end && key <= my && (window <= 0 || key > my - window);
              if (!ok) s[mt][j][i] = kNegInf;
            }
      }

#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        online_softmax_tile(s[mt], row_max[mt], row_sum[mt], o[mt]);  // S becomes P

        // O += P V: P's accumulator tiles (2kk, 2kk + 1) are the A fragment of key step kk; V's
        // rows are keys, so its B fragments come through the transposing ldmatrix.
#pragma unroll
      for (int kk = 0; kk < PV_STEPS; ++kk) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int j = 0; j < O_TILES; j += 2) {
          const int mat = lane / 8;
          uint32_t vf[4];
          ldmatrix_x4_trans(vf, Vt + (kk * 16 + (mat % 2) * 8 + lane % 8) * LD + (j + mat / 2) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(o[mt][j], pa[mt], vf[0], vf[1]);
            mma_bf16(o[mt][j + 1], pa[mt], vf[2], vf[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with `buf` before the next iteration refills it
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float l = row_sum[mt][rr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      // A sink logit joins the denominator only (gpt-oss); row_max is in log2 units.
      if (p.sinks) {
        const float sink = p.sinks[h] * kLog2e, m = row_max[mt][rr];
        l += m == kNegInf ? 1.0f : exp2f(sink - m);
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int r = w0 + 16 * mt + g + 8 * rr;
      if (r >= rows) continue;
      OutT* dst = out + (static_cast<int64_t>(tok0 + m0 + r) * p.num_q_heads + h) * D + 2 * t;
#pragma unroll
      for (int j = 0; j < O_TILES; ++j)
        store_pair(dst + j * 8, o[mt][j][2 * rr] * inv, o[mt][j][2 * rr + 1] * inv);
    }
}

template <typename OutT, int D, int MT>
void launch_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                  const AttentionParams& p, int max_extend, OutT* out, cudaStream_t stream) {
  constexpr int BM = 16 * MT * kWarps;
  constexpr size_t smem = tile_smem_bytes<D, MT>();
  static_assert(smem <= 227 * 1024, "tile buffers exceed a block's shared memory");
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(extend_tiles_kernel<OutT, D, MT>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  const dim3 grid((max_extend + BM - 1) / BM, p.num_q_heads, batch.batch);
  extend_tiles_kernel<OutT, D, MT><<<grid, kWarps * 32, smem, stream>>>(q, kv, batch, p, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

template <typename OutT, int D>
void launch_rows(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                 const AttentionParams& p, int max_extend, int rows_per_warp, OutT* out,
                 cudaStream_t stream) {
  if (rows_per_warp == 32)
    launch_tiles<OutT, D, 2>(q, kv, batch, p, max_extend, out, stream);
  else
    launch_tiles<OutT, D, 1>(q, kv, batch, p, max_extend, out, stream);
}

}  // namespace

template <typename OutT>
void extend_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                  const AttentionParams& p, int max_extend, OutT* out, cudaStream_t stream,
                  int rows_per_warp) {
  if (kv.k_head_dim == 128)
    launch_rows<OutT, 128>(q, kv, batch, p, max_extend, rows_per_warp, out, stream);
  else
    launch_rows<OutT, 64>(q, kv, batch, p, max_extend, rows_per_warp, out, stream);
}

template void extend_tiles<bf16>(const float*, const DeviceKV&, const PagedBatch&,
                                 const AttentionParams&, int, bf16*, cudaStream_t, int);
template void extend_tiles<float>(const float*, const DeviceKV&, const PagedBatch&,
                                  const AttentionParams&, int, float*, cudaStream_t, int);

}  // namespace strata::cuda::attention_detail
