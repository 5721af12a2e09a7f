// Decode stage 1 on tensor cores for the common head widths (64 and 128, the value as wide
// as the key, in its own rows): the query heads that share a KV head are the rows of one
// 16-row tile, so each key and value row is read from memory once for the whole group and
// scored against every head with mma.sync. Decode is bound by reading the cache: the point is
// to keep many bytes in flight, so key/value tiles stream through a STAGES-deep cp.async ring
// in shared memory while the warps work on an earlier tile. attention_decode.cu keeps the
// lane-per-chunk kernel for every other layout, and its stage 2 merges the splits either way.
//
// Block = (request, KV head, split); its warps (4, or 2 for more resident blocks: the bench
// sweeps both) take 16 keys each of every tile and keep their own online softmax and O in
// registers; the block merges them at the end and writes the split's partial output and
// log-sum-exp (natural log, as stage 2 reads them).
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/attention_tiles.h"

namespace strata::cuda::attention_detail {

namespace {

constexpr int kRows = 16;  // rows: query heads of a group, zero-padded to 16
constexpr int kWarpKeys = 16;
template <int D, int kStages, int kWarps>
constexpr size_t ring_bytes() {
  return size_t(kStages) * 2 /*K, V*/ * kWarpKeys * kWarps * (D + 8) * sizeof(bf16);
}
template <int D, int kWarps>
constexpr size_t merge_bytes() {  // per warp: O [16][D], then max and sum per row
  return size_t(kWarps) * (kRows * D + 2 * kRows) * sizeof(float);
}

template <int D, int kStages, int kWarps>
__global__ __launch_bounds__(kWarps *
                             32) void decode_tiles_kernel(const float* q, DeviceKV kv,
                                                          PagedBatch batch, AttentionParams p,
                                                          int num_splits, float* partial_out,
                                                          float* partial_lse) {
  constexpr int LD = D + 8, QK_STEPS = D / 16, O_TILES = D / 8;
  constexpr int kTileKeys = kWarpKeys * kWarps;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* const Ks = reinterpret_cast<bf16*>(smem_raw);  // [kStages][kTileKeys][LD]
  bf16* const Vs = Ks + kStages * kTileKeys * LD;

  const int b = blockIdx.x, split = blockIdx.z;
  const int group = p.num_q_heads / kv.num_kv_heads, chunks = (group + kRows - 1) / kRows;
  const int kv_head = blockIdx.y / chunks;
  const int h0 = kv_head * group + (blockIdx.y % chunks) * kRows;
  const int heads = min(kRows, group - (blockIdx.y % chunks) * kRows);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;

  const auto keys = decode_split(batch, p, b, split, num_splits);
  const int begin = keys.begin, end = keys.end;
  const int32_t* req_row = request_slots(batch, b);

  const int n_tiles = (end - begin + kTileKeys - 1) / kTileKeys;
  // A tile is kTileKeys rows of D / 8 16-byte chunks; thread x copies chunks x, x + 128, ...,
  // so its rows are fixed: x / CHUNKS + i * ROW_STEP. Their page-table entries are fetched a
  // tile ahead into registers (-1 past the split): looking each one up just before its copy put
  // a dependent global load in front of every row, as it did in the MLA kernel's first version
  // (attention_decode_mla.cu), and the copies waited on those lookups in turn.
  constexpr int CHUNKS = D / 8, COPIES = kTileKeys * CHUNKS / (kWarps * 32);
  constexpr int ROW_STEP = kWarps * 32 / CHUNKS;
  static_assert(kTileKeys * CHUNKS % (kWarps * 32) == 0 && kWarps * 32 % CHUNKS == 0,
                "tile copies per thread");
  struct Slots {
    int32_t row[COPIES];
  };
  auto fetch_slots = [&](int tile) {
    Slots s;
    const int kb = begin + tile * kTileKeys + static_cast<int>(threadIdx.x) / CHUNKS;
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
      const int kp = kb + i * ROW_STEP;
      s.row[i] = tile < n_tiles && kp < end ? req_row[kp] : -1;
    }
    return s;
  };
  auto load_tile = [&](int tile, const Slots& slots) {
    if (tile < n_tiles) {
      const int stage = tile % kStages, c = (threadIdx.x % CHUNKS) * 8;
#pragma unroll
      for (int i = 0; i < COPIES; ++i) {
        const int n = static_cast<int>(threadIdx.x) / CHUNKS + i * ROW_STEP;
        const int32_t slot = slots.row[i];
        const int64_t at_slot = slot < 0 ? 0 : slot;
        const int at = (stage * kTileKeys + n) * LD + c;
        cp_async16(Ks + at, kv.k + at_slot * kv.k_row_stride + kv_head * D + c, slot >= 0);
        cp_async16(Vs + at, kv.v + at_slot * kv.v_row_stride + kv_head * D + c, slot >= 0);
      }
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load_tile(s, fetch_slots(s));
  Slots slots = fetch_slots(kStages - 1);

  // Rows g and g + 8 are query heads h0 + g and h0 + g + 8 (zeros past the group).
  const bool capped = p.softcap > 0.0f;
  const float q_scale = capped ? p.scale : p.scale * kLog2e;
  uint32_t qf[QK_STEPS][4];
  {
    const int64_t tok = batch.token_offsets[b];
    const float* q0 = q + tok * p.q_row_stride + static_cast<int64_t>(h0 + g) * D;
    const float* q1 = q0 + 8 * D;
    const bool ok0 = g < heads, ok1 = g + 8 < heads;
    load_q_fragments(q0, ok0, q1, ok1, t, q_scale, qf);
  }

  float o[O_TILES][4];
#pragma unroll
  for (int j = 0; j < O_TILES; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.0f, 0.0f};  // this lane's part

  for (int it = 0; it < n_tiles; ++it) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile `it` has landed for every thread; tile it - 1's stage is free
    load_tile(it + kStages - 1, slots);
    slots = fetch_slots(it + kStages);  // used by the next iteration's copies: latency hidden
    const int stage = it % kStages, kw = begin + it * kTileKeys + warp * kWarpKeys;
    const bf16* Kt = Ks + (stage * kTileKeys + warp * kWarpKeys) * LD;
    const bf16* Vt = Vs + (stage * kTileKeys + warp * kWarpKeys) * LD;

    // S = Q K^T over this warp's 16 keys: two 8-key accumulator tiles.
    float s[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < QK_STEPS; ++ks) {
      const int mat = lane / 8;
      uint32_t kf[4];
      ldmatrix_x4(kf, Kt + ((mat / 2) * 8 + lane % 8) * LD + ks * 16 + (mat % 2) * 8);
      mma_bf16(s[0], qf[ks], kf[0], kf[1]);
      mma_bf16(s[1], qf[ks], kf[2], kf[3]);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (capped) s[j][i] = soft_cap(s[j][i], p.softcap) * kLog2e;
        if (kw + j * 8 + 2 * t + (i & 1) >= end) s[j][i] = kNegInf;
      }

    online_softmax_tile(s, row_max, row_sum, o);  // S becomes P

    // O += P V: P's two accumulator tiles are one 16-key A fragment.
    const uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]),
                            pack_bf16(s[1][0], s[1][1]), pack_bf16(s[1][2], s[1][3])};
#pragma unroll
    for (int j = 0; j < O_TILES; j += 2) {
      const int mat = lane / 8;
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, Vt + ((mat % 2) * 8 + lane % 8) * LD + (j + mat / 2) * 8);
      mma_bf16(o[j], pa, vf[0], vf[1]);
      mma_bf16(o[j + 1], pa, vf[2], vf[3]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the ring is free: reuse it for the merge

  // Each warp's rows: O and the quad-reduced max and sum, then one pass over the block's
  // [heads, D] output merging the four warps.
  float* const merge = reinterpret_cast<float*>(smem_raw);
  float* const w_o = merge + warp * (kRows * D + 2 * kRows);
  float* const w_max = w_o + kRows * D;
  float* const w_sum = w_max + kRows;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = row_sum[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = g + 8 * rr;
    if (t == 0) w_max[r] = row_max[rr], w_sum[r] = l;
#pragma unroll
    for (int j = 0; j < O_TILES; ++j) {
      w_o[r * D + j * 8 + 2 * t] = o[j][2 * rr];
      w_o[r * D + j * 8 + 2 * t + 1] = o[j][2 * rr + 1];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < heads * D; idx += kWarps * 32) {
    const int r = idx / D, d = idx % D;
    float mx = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      mx = fmaxf(mx, merge[w * (kRows * D + 2 * kRows) + kRows * D + r]);
    const int64_t part = (static_cast<int64_t>(b) * p.num_q_heads + h0 + r) * num_splits + split;
    if (mx == kNegInf) {  // an empty split: it must not count in the merge
      partial_out[part * D + d] = 0.0f;
      if (d == 0) partial_lse[part] = kNegInf;
      continue;
    }
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* wb = merge + w * (kRows * D + 2 * kRows);
      const float e = exp2f(wb[kRows * D + r] - mx);
      sum += wb[kRows * D + kRows + r] * e;
      acc += wb[r * D + d] * e;
    }
    partial_out[part * D + d] = acc / sum;
    // Scores are in log2 units here; stage 2 reads natural-log sums.
    if (d == 0) partial_lse[part] = (mx + log2f(sum)) * 0.6931471805599453f;
  }
}

template <int D, int kStages, int kWarps>
void launch_decode_tiles(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                         const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  constexpr size_t smem = std::max(ring_bytes<D, kStages, kWarps>(), merge_bytes<D, kWarps>());
  static_assert(smem <= 227 * 1024, "decode ring exceeds a block's shared memory");
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(decode_tiles_kernel<D, kStages, kWarps>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  const int group = p.num_q_heads / kv.num_kv_heads;
  const dim3 grid(batch.batch, kv.num_kv_heads * ((group + kRows - 1) / kRows), ws.num_splits);
  decode_tiles_kernel<D, kStages, kWarps><<<grid, kWarps * 32, smem, stream>>>(
      q, kv, batch, p, ws.num_splits, ws.partial_out, ws.partial_lse);
  STRATA_CUDA_CHECK_LAUNCH();
}

template <int D, int kWarps>
void launch_decode_tiles_depth(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                               const AttentionParams& p, const DecodeWorkspace& ws,
                               cudaStream_t stream) {
  switch (ws.tile_stages > 0 ? ws.tile_stages : kDefaultDecodeTileStages) {
    case 3:
      return launch_decode_tiles<D, 3, kWarps>(q, kv, batch, p, ws, stream);
    case 4:
      return launch_decode_tiles<D, 4, kWarps>(q, kv, batch, p, ws, stream);
    default:
      return launch_decode_tiles<D, 2, kWarps>(q, kv, batch, p, ws, stream);
  }
}

template <int D>
void launch_decode_tiles_warps(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                               const AttentionParams& p, const DecodeWorkspace& ws,
                               cudaStream_t stream) {
  const int default_warps = D == 128 ? kDefaultDecodeTileWarps : kDefaultDecodeTileWarpsD64;
  if ((ws.tile_warps > 0 ? ws.tile_warps : default_warps) == 2)
    launch_decode_tiles_depth<D, 2>(q, kv, batch, p, ws, stream);
  else
    launch_decode_tiles_depth<D, 4>(q, kv, batch, p, ws, stream);
}

}  // namespace

void decode_tiles_stage1(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                         const AttentionParams& p, const DecodeWorkspace& ws, cudaStream_t stream) {
  if (kv.k_head_dim == 128)
    launch_decode_tiles_warps<128>(q, kv, batch, p, ws, stream);
  else
    launch_decode_tiles_warps<64>(q, kv, batch, p, ws, stream);
}

}  // namespace strata::cuda::attention_detail
