// Decode stage 1 on tensor cores for MLA's latent cache (DeepSeek V2/V3: one KV head whose
// 576-wide row is the 512-wide latent, also the value, then 64 rope columns; absorbed queries
// of the same width). Every query head attends the same latent row, so the point is to read
// each row into shared memory once for a block of query heads and score it with mma.sync:
// the lane kernel in attention_decode.cu read it once per two heads, from registers, at 5% of
// copy bandwidth.
//
// Block = (16 R query heads, split, request), 4 R warps. Each tile of 64 keys streams through
// a two-stage cp.async ring (one 576-wide tile is 73 KB; a third stage would not fit beside
// Q). Per tile:
//   1. S = Q K^T: warp (rg, kg) scores rows 16 rg.. against keys 16 kg.. over every column,
//      Q and K both ldmatrix'ed from shared memory (Q's 36 k-steps do not fit registers);
//   2. the four key groups agree on each row's maximum through shared memory, every warp
//      computing the same running maxima from the same values (no second round trip);
//   3. P = exp2(S - max) goes to shared memory as bf16;
//   4. O += P V: warp w owns output columns DV / (4 R) * w.. for all 16 R rows, V read with
//      ldmatrix.trans straight out of the same K tile (the value is the row's first DV
//      columns).
// Sixteen-row tiles cost one ldmatrix per mma in step 1, so at V3's 128 heads the kernel is
// bound by shared-memory bandwidth, not by the cache read; R = 2 (32 heads a block) halves
// the L2 reads of each tile and the ldmatrix per mma of step 4.
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tiles.h"
#include "kernels/cuda/tensor_core_ptx.cuh"

namespace strata::cuda::attention_detail {

namespace {

constexpr int kTileKeys = 64, kKeyGroups = 4, kGroupKeys = kTileKeys / kKeyGroups;
constexpr int kStages = 2;
constexpr int kPLd = kTileKeys + 8;  // P row in bf16; 16 bytes of padding, as kLd

template <int DK, int DV, int R>
struct MlaTile {
  static constexpr int kRows = 16 * R, kWarps = kKeyGroups * R, kThreads = 32 * kWarps;
  // A shared row of DK + 8 bf16: the 16-byte pad puts ldmatrix's eight row addresses in
  // distinct banks (a 1152-byte row would put all eight in one).
  static constexpr int kLd = DK + 8;
  static constexpr int kCols = DV / kWarps, kOTiles = kCols / 8;  // P V columns per warp
  static constexpr size_t kRing = size_t(kStages) * kTileKeys * kLd * sizeof(bf16);
  static constexpr size_t kQ = size_t(kRows) * kLd * sizeof(bf16);
  static constexpr size_t kP = size_t(kRows) * kPLd * sizeof(bf16);
  static constexpr size_t kRed = size_t(kKeyGroups) * kRows * sizeof(float);
  static constexpr size_t kSmem = kRing + kQ + kP + kRed;
  static_assert(DK % 16 == 0 && DV <= DK && kCols % 16 == 0, "MLA tile widths");
  static_assert(kSmem <= 227 * 1024, "MLA decode tiles exceed a block's shared memory");
};

template <int DK, int DV, int R>
__global__ __launch_bounds__(MlaTile<DK, DV, R>::kThreads,
                             1) void decode_mla_kernel(const float* q, DeviceKV kv,
                                                       PagedBatch batch, AttentionParams p,
                                                       int num_splits, float* partial_out,
                                                       float* partial_lse) {
  using T = MlaTile<DK, DV, R>;
  constexpr int LD = T::kLd, QK_STEPS = DK / 16, CHUNKS = DK / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* const Ks = reinterpret_cast<bf16*>(smem_raw);                 // [kStages][kTileKeys][LD]
  bf16* const Qs = Ks + kStages * kTileKeys * LD;                     // [kRows][LD]
  bf16* const Ps = Qs + T::kRows * LD;                                // [kRows][kPLd]
  float* const red = reinterpret_cast<float*>(Ps + T::kRows * kPLd);  // [kKeyGroups][kRows]

  // Head blocks fastest, then splits: the blocks that read the same keys run together (all
  // but the first find them in L2), and a request's splits share its q rows.
  const int h0 = blockIdx.x * T::kRows, split = blockIdx.y, b = blockIdx.z;
  const int heads = min(T::kRows, p.num_q_heads - h0);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int mat = lane / 8;  // which 8x8 matrix of an ldmatrix_x4 this lane addresses
  const int rg = warp / kKeyGroups, kg = warp % kKeyGroups;  // step 1's rows and keys

  const auto keys = decode_split(batch, p, b, split, num_splits);
  const int begin = keys.begin, end = keys.end;
  const int32_t* req_row = request_slots(batch, b);
  const int n_tiles = (end - begin + kTileKeys - 1) / kTileKeys;

  // A warp per key row: its lanes copy consecutive 16-byte chunks (one 1152-byte read). The
  // page-table entries of a tile are fetched a tile ahead, one per lane (lane i: row
  // warp + i * kWarps; -1 past the split): a lookup per row just before its copy put a
  // dependent global load in front of every row, and the block waited on them in turn
  // (measured: 7 us a tile, a quarter of copy bandwidth at 16 heads). Keys past the split are
  // zero filled: their P is 0, and 0 times stale shared memory could be NaN.
  constexpr int ROWS_PER_WARP = kTileKeys / T::kWarps;
  auto fetch_slots = [&](int tile) {
    const int kp = begin + tile * kTileKeys + warp + lane * T::kWarps;
    return tile < n_tiles && lane < ROWS_PER_WARP && kp < end ? req_row[kp] : -1;
  };
  auto load_tile = [&](int tile, int slots) {
    if (tile < n_tiles) {
      bf16* const dst = Ks + (tile % kStages) * kTileKeys * LD;
#pragma unroll
      for (int i = 0; i < ROWS_PER_WARP; ++i) {
        const int n = warp + i * T::kWarps, slot = __shfl_sync(0xffffffffu, slots, i);
        const bf16* src = kv.k + int64_t(slot < 0 ? 0 : slot) * kv.k_row_stride;
        for (int c = lane; c < CHUNKS; c += 32)
          cp_async16(dst + n * LD + c * 8, src + c * 8, slot >= 0);
      }
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };
  int slots = fetch_slots(0);
  load_tile(0, slots);
  slots = fetch_slots(1);

  // Q rows as bf16, unscaled (the scale and log2(e) multiply S in f32, so bf16-exact queries
  // stay exact); rows past the last head are zeros (scored, never written). Loads in batches
  // of kQBatch before their stores, so that they are in flight together.
  const float score_scale = p.scale * kLog2e;
  {
    constexpr int PAIRS = T::kRows * (DK / 2) / T::kThreads, kQBatch = 12;
    static_assert(T::kRows * (DK / 2) % T::kThreads == 0 && PAIRS % kQBatch == 0, "Q load");
    const float* qb = q + batch.token_offsets[b] * p.q_row_stride + int64_t(h0) * DK;
#pragma unroll
    for (int i0 = 0; i0 < PAIRS; i0 += kQBatch) {
      float2 v[kQBatch];
#pragma unroll
      for (int i = 0; i < kQBatch; ++i) {
        const int idx = threadIdx.x + (i0 + i) * T::kThreads, r = idx / (DK / 2);
        v[i] = r < heads ? *reinterpret_cast<const float2*>(qb + int64_t(idx) * 2)
                         : make_float2(0.0f, 0.0f);
      }
#pragma unroll
      for (int i = 0; i < kQBatch; ++i) {
        const int idx = threadIdx.x + (i0 + i) * T::kThreads, r = idx / (DK / 2);
        *reinterpret_cast<uint32_t*>(Qs + r * LD + (idx % (DK / 2)) * 2) =
            pack_bf16(v[i].x, v[i].y);
      }
    }
  }  // the loop's first barrier orders these stores before any ldmatrix of them

  // Running maxima of the rows this lane holds in step 4 (rows 16 r + g and 16 r + g + 8),
  // the same in every warp; this lane's share of the sums of its step-1 rows.
  float m_run[R][2], l_part[2] = {0.0f, 0.0f};
  float o[R][T::kOTiles][4];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m_run[r][0] = m_run[r][1] = kNegInf;
#pragma unroll
    for (int j = 0; j < T::kOTiles; ++j) o[r][j][0] = o[r][j][1] = o[r][j][2] = o[r][j][3] = 0.0f;
  }

  for (int it = 0; it < n_tiles; ++it) {
    cp_async_wait<0>();  // two stages: the one tile in flight
    __syncthreads();     // tile `it` landed for every thread; the previous tile's reads are done
    load_tile(it + 1, slots);
    slots = fetch_slots(it + 2);  // used by the next iteration's copy: its latency is hidden
    const bf16* const Kt = Ks + (it % kStages) * kTileKeys * LD;

    // 1. S over this warp's 16 rows x 16 keys: two 8-key accumulator tiles, with even and
    // odd k-steps in separate accumulators (four independent mma chains, not two), the next
    // step's fragments loaded before this step's products.
    float s[2][4];
    {
      float acc[2][2][4] = {};
      const bf16* qa = Qs + (rg * 16 + lane % 8 + (mat % 2) * 8) * LD + (mat / 2) * 8;
      const bf16* ka = Kt + (kg * kGroupKeys + (mat / 2) * 8 + lane % 8) * LD + (mat % 2) * 8;
      uint32_t qf[2][4], kf[2][4];
      ldmatrix_x4(qf[0], qa);
      ldmatrix_x4(kf[0], ka);
#pragma unroll
      for (int ks = 0; ks < QK_STEPS; ++ks) {
        const int cur = ks & 1;
        if (ks + 1 < QK_STEPS) {
          ldmatrix_x4(qf[cur ^ 1], qa + (ks + 1) * 16);
          ldmatrix_x4(kf[cur ^ 1], ka + (ks + 1) * 16);
        }
        mma_bf16(acc[cur][0], qf[cur], kf[cur][0], kf[cur][1]);
        mma_bf16(acc[cur][1], qf[cur], kf[cur][2], kf[cur][3]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[j][i] = (acc[0][j][i] + acc[1][j][i]) * score_scale;
    }

    // 2. Mask keys past the split; each row's maximum over this warp's keys, then over the
    // four key groups.
    const int kw = begin + it * kTileKeys + kg * kGroupKeys;
    float tmax[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (kw + j * 8 + 2 * t + (i & 1) >= end) s[j][i] = kNegInf;
        tmax[i / 2] = fmaxf(tmax[i / 2], s[j][i]);
      }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      tmax[rr] = fmaxf(tmax[rr], __shfl_xor_sync(0xffffffffu, tmax[rr], 1));
      tmax[rr] = fmaxf(tmax[rr], __shfl_xor_sync(0xffffffffu, tmax[rr], 2));
      if (t == 0) red[kg * T::kRows + rg * 16 + g + 8 * rr] = tmax[rr];
    }
    __syncthreads();
    float alpha[R][2], m_mine[2] = {kNegInf, kNegInf}, a_mine[2] = {1.0f, 1.0f};
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float mx = m_run[r][rr];
#pragma unroll
        for (int k = 0; k < kKeyGroups; ++k)
          mx = fmaxf(mx, red[k * T::kRows + r * 16 + g + 8 * rr]);
        // A row with no key yet subtracts 0, so exp2(-inf - 0) = 0 and never NaN.
        alpha[r][rr] = exp2f(m_run[r][rr] - (mx == kNegInf ? 0.0f : mx));
        m_run[r][rr] = mx;
        if (r == rg) m_mine[rr] = mx, a_mine[rr] = alpha[r][rr];  // unrolled: no local memory
      }

      // 3. P = exp2(S - max) to shared memory; this lane's part of its rows' sums.
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float base = m_mine[rr] == kNegInf ? 0.0f : m_mine[rr];
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        s[j][2 * rr] = exp2f(s[j][2 * rr] - base);
        s[j][2 * rr + 1] = exp2f(s[j][2 * rr + 1] - base);
        sum += s[j][2 * rr] + s[j][2 * rr + 1];
        *reinterpret_cast<uint32_t*>(Ps + (rg * 16 + g + 8 * rr) * kPLd + kg * kGroupKeys + j * 8 +
                                     2 * t) = pack_bf16(s[j][2 * rr], s[j][2 * rr + 1]);
      }
      l_part[rr] = l_part[rr] * a_mine[rr] + sum;
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < T::kOTiles; ++j) {
        o[r][j][0] *= alpha[r][0], o[r][j][1] *= alpha[r][0];
        o[r][j][2] *= alpha[r][1], o[r][j][3] *= alpha[r][1];
      }
    __syncthreads();  // P complete

    // 4. O += P V over the tile's four 16-key steps; V is the K tile's first DV columns.
#pragma unroll
    for (int ks = 0; ks < kTileKeys / 16; ++ks) {
      uint32_t pf[R][4];
#pragma unroll
      for (int r = 0; r < R; ++r)
        ldmatrix_x4(pf[r],
                    Ps + (r * 16 + lane % 8 + (mat % 2) * 8) * kPLd + ks * 16 + (mat / 2) * 8);
      const bf16* vb =
          Kt + (ks * 16 + (mat % 2) * 8 + lane % 8) * LD + warp * T::kCols + (mat / 2) * 8;
#pragma unroll
      for (int j = 0; j < T::kOTiles; j += 2) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vb + j * 8);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          mma_bf16(o[r][j], pf[r], vf[0], vf[1]);
          mma_bf16(o[r][j + 1], pf[r], vf[2], vf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Row sums: the quad's lanes, then the four key groups through shared memory (every read
  // of `red` in the loop came before its last barrier).
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = l_part[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t == 0) red[kg * T::kRows + rg * 16 + g + 8 * rr] = l;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = r * 16 + g + 8 * rr;
      if (row >= heads) continue;
      float l = 0.0f;
#pragma unroll
      for (int k = 0; k < kKeyGroups; ++k) l += red[k * T::kRows + row];
      const int64_t part = (int64_t(b) * p.num_q_heads + h0 + row) * num_splits + split;
      // An empty split (no key: l = 0, O = 0) writes zeros and -inf, so the merge skips it.
      const bool empty = !(l > 0.0f);
      const float inv = empty ? 0.0f : 1.0f / l;
      float* dst = partial_out + part * DV + warp * T::kCols + 2 * t;
#pragma unroll
      for (int j = 0; j < T::kOTiles; ++j)
        store_pair(dst + j * 8, o[r][j][2 * rr] * inv, o[r][j][2 * rr + 1] * inv);
      // Scores are in log2 units here; stage 2 reads natural-log sums.
      if (warp == 0 && t == 0)
        partial_lse[part] = empty ? kNegInf : (m_run[r][rr] + log2f(l)) * 0.6931471805599453f;
    }
}

template <int DK, int DV, int R>
void launch_decode_mla(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                       const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  using T = MlaTile<DK, DV, R>;
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(decode_mla_kernel<DK, DV, R>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(T::kSmem)));
  const dim3 grid((p.num_q_heads + T::kRows - 1) / T::kRows, ws.num_splits, batch.batch);
  decode_mla_kernel<DK, DV, R><<<grid, T::kThreads, T::kSmem, stream>>>(
      q, kv, batch, p, ws.num_splits, ws.partial_out, ws.partial_lse);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void decode_mla_stage1(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                       const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  // 32 heads a block once there are more than 16: each tile read from L2 feeds twice the rows.
  const int head_block = ws.mla_head_block > 0 ? ws.mla_head_block : p.num_q_heads > 16 ? 32 : 16;
  if (head_block == 32) return launch_decode_mla<576, 512, 2>(q, kv, batch, p, ws, stream);
  launch_decode_mla<576, 512, 1>(q, kv, batch, p, ws, stream);
}

}  // namespace strata::cuda::attention_detail
