// The extend attention kernel for the common head widths (64 and 128, value as wide as the
// key, in its own rows): FlashAttention-2's structure on sm_80+ tensor-core instructions.
// attention_extend.cu keeps the general WMMA kernel for every other layout (MLA's latent,
// 256-wide heads, mixed widths) and calls this one where it applies.
//
// Block = BM = 16 * WARPS new tokens of one request and one query head; each warp owns 16
// query rows end to end and keeps everything about them in registers: its Q fragments
// (loaded once, pre-scaled), the scores S = Q K^T of the current key tile (mma.sync
// m16n8k16, bf16 in, f32 out), the online softmax state, and O. The scores' accumulator
// layout is the next product's A operand layout, so P never touches shared memory. Key and
// value tiles of BN keys stream through shared memory with cp.async, double-buffered: the next
// tile's loads are in flight while the current one is multiplied. Rows are padded by 16 bytes
// so the eight rows one ldmatrix reads fall in distinct banks.
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/attention_tiles.h"
#include "kernels/cuda/convert.cuh"

namespace strata::cuda::attention_detail {

namespace {

constexpr int kTileKeys = 64;  // BN

template <int D>
constexpr size_t tile_smem_bytes() {
  return size_t(2 /*K, V*/) * 2 /*buffers*/ * kTileKeys * (D + 8) * sizeof(bf16);
}

template <typename OutT, int D, int WARPS>
__global__ __launch_bounds__(WARPS * 32) void extend_tiles_kernel(const float* q, DeviceKV kv,
                                                                  PagedBatch batch,
                                                                  AttentionParams p, OutT* out) {
  constexpr int BM = 16 * WARPS, BN = kTileKeys, LD = D + 8;
  constexpr int QK_STEPS = D / 16, S_TILES = BN / 8, O_TILES = D / 8, PV_STEPS = BN / 16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* const Ks = reinterpret_cast<bf16*>(smem_raw);  // [2][BN][LD]
  bf16* const Vs = Ks + 2 * BN * LD;                   // [2][BN][LD]

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
  const int kv_begin = window > 0 ? max(0, first_pos - window + 1) : 0;
  const int kv_end = last_pos + 1;
  const int32_t* req_row = request_slots(batch, b);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;  // the mma fragment's row group and column pair

  // The tile of keys [kb, kb + BN) into buffer `buf`; keys past kv_end read as zeros (their
  // scores are masked, and a zero value row keeps 0 * garbage out of O).
  auto load_tile = [&](int kb, int buf) {
    constexpr int CHUNKS = D / 8;
    for (int idx = threadIdx.x; idx < BN * CHUNKS; idx += WARPS * 32) {
      const int n = idx / CHUNKS, c = (idx % CHUNKS) * 8, kp = kb + n;
      const bool ok = kp < kv_end;
      const int64_t slot = ok ? req_row[kp] : 0;
      cp_async16(Ks + (buf * BN + n) * LD + c, kv.k + slot * kv.k_row_stride + kv_head * D + c, ok);
      cp_async16(Vs + (buf * BN + n) * LD + c, kv.v + slot * kv.v_row_stride + kv_head * D + c, ok);
    }
    cp_async_commit();
  };
  load_tile(kv_begin, 0);

  // Q fragments of rows r0 = warp * 16 + g and r1 = r0 + 8, scaled so that exp2 gives the
  // softmax (with a soft cap the scale must come before the tanh, the log2(e) after it).
  const bool capped = p.softcap > 0.0f;
  const float q_scale = capped ? p.scale : p.scale * kLog2e;
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  uint32_t qf[QK_STEPS][4];
  {
    const float* q0 = q + static_cast<int64_t>(tok0 + m0 + r0) * p.q_row_stride + h * D;
    const float* q1 = q + static_cast<int64_t>(tok0 + m0 + r1) * p.q_row_stride + h * D;
    const bool ok0 = r0 < rows, ok1 = r1 < rows;
    load_q_fragments(q0, ok0, q1, ok1, t, q_scale, qf);
  }

  float o[O_TILES][4];
#pragma unroll
  for (int j = 0; j < O_TILES; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.0f, 0.0f};  // this lane's part
  const int pos[2] = {prefix + m0 + r0, prefix + m0 + r1};

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

    // S = Q K^T: K's rows are keys, i.e. the B operand already in column-major form.
    float s[S_TILES][4];
#pragma unroll
    for (int j = 0; j < S_TILES; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < QK_STEPS; ++ks) {
#pragma unroll
      for (int j = 0; j < S_TILES; j += 2) {
        const int mat = lane / 8;
        uint32_t kf[4];
        ldmatrix_x4(kf, Kt + ((j + mat / 2) * 8 + lane % 8) * LD + ks * 16 + (mat % 2) * 8);
        mma_bf16(s[j], qf[ks], kf[0], kf[1]);
        mma_bf16(s[j + 1], qf[ks], kf[2], kf[3]);
      }
    }

    if (capped) {
#pragma unroll
      for (int j = 0; j < S_TILES; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[j][i] = soft_cap(s[j][i], p.softcap) * kLog2e;
    }
    // Only tiles crossing the diagonal, the window's edge or the end need the mask.
    const bool full =
        kb + BN - 1 <= first_pos && kb + BN <= kv_end && (window <= 0 || kb > last_pos - window);
    if (!full) {
#pragma unroll
      for (int j = 0; j < S_TILES; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = kb + j * 8 + 2 * t + (i & 1), my = pos[i / 2];
          const bool ok = key < kv_end && key <= my && (window <= 0 || key > my - window);
          if (!ok) s[j][i] = kNegInf;
        }
    }

    online_softmax_tile(s, row_max, row_sum, o);  // S becomes P

    // O += P V: P's accumulator tiles (2kk, 2kk + 1) are the A fragment of key step kk; V's
    // rows are keys, so its B fragments come through the transposing ldmatrix.
#pragma unroll
    for (int kk = 0; kk < PV_STEPS; ++kk) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < O_TILES; j += 2) {
        const int mat = lane / 8;
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, Vt + (kk * 16 + (mat % 2) * 8 + lane % 8) * LD + (j + mat / 2) * 8);
        mma_bf16(o[j], pa, vf[0], vf[1]);
        mma_bf16(o[j + 1], pa, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with `buf` before the next iteration refills it
  }

#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = row_sum[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    // A sink logit joins the denominator only (gpt-oss); row_max is in log2 units.
    if (p.sinks) {
      const float sink = p.sinks[h] * kLog2e, m = row_max[rr];
      l += m == kNegInf ? 1.0f : exp2f(sink - m);
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int r = rr == 0 ? r0 : r1;
    if (r >= rows) continue;
    OutT* dst = out + (static_cast<int64_t>(tok0 + m0 + r) * p.num_q_heads + h) * D + 2 * t;
#pragma unroll
    for (int j = 0; j < O_TILES; ++j)
      store_pair(dst + j * 8, o[j][2 * rr] * inv, o[j][2 * rr + 1] * inv);
  }
}

template <typename OutT, int D, int WARPS>
void launch_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                  const AttentionParams& p, int max_extend, OutT* out, cudaStream_t stream) {
  constexpr int BM = 16 * WARPS;
  constexpr size_t smem = tile_smem_bytes<D>();
  static_assert(smem <= 227 * 1024, "tile buffers exceed a block's shared memory");
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(extend_tiles_kernel<OutT, D, WARPS>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  const dim3 grid((max_extend + BM - 1) / BM, p.num_q_heads, batch.batch);
  extend_tiles_kernel<OutT, D, WARPS><<<grid, WARPS * 32, smem, stream>>>(q, kv, batch, p, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename OutT>
void extend_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                  const AttentionParams& p, int max_extend, OutT* out, cudaStream_t stream) {
  if (kv.k_head_dim == 128)
    launch_tiles<OutT, 128, 4>(q, kv, batch, p, max_extend, out, stream);
  else
    launch_tiles<OutT, 64, 4>(q, kv, batch, p, max_extend, out, stream);
}

template void extend_tiles<bf16>(const float*, const DeviceKV&, const PagedBatch&,
                                 const AttentionParams&, int, bf16*, cudaStream_t);
template void extend_tiles<float>(const float*, const DeviceKV&, const PagedBatch&,
                                  const AttentionParams&, int, float*, cudaStream_t);

}  // namespace strata::cuda::attention_detail
