#include <mma.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe.h"

namespace strata::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileM = kMoeTileRows, kTileN = 64, kTileK = 16;

// One block: count per expert in shared memory, a serial scan by thread 0 (E <= 1024, so a
// few microseconds) that also lays out the tile table, then each pair takes a slot in its
// expert's range. The order inside an expert's range is not deterministic, which is harmless:
// every row of a tile is computed independently and results go back by pair index.
__global__ void moe_sort_kernel(const int32_t* ids, int pairs, int top_k, int num_experts,
                                MoeSort s) {
  extern __shared__ int sh[];
  int* count = sh;
  int* cursor = sh + num_experts;
  for (int i = threadIdx.x; i < num_experts; i += blockDim.x) count[i] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = ids[p];
    if (e >= 0 && e < num_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int offset = 0, tile = 0;
    for (int e = 0; e < num_experts; ++e) {
      cursor[e] = offset;
      const int end = offset + count[e];
      for (int start = offset; start < end; start += kTileM, ++tile) {
        s.tile_expert[tile] = e;
        s.tile_start[tile] = start;
        s.tile_end[tile] = end;
      }
      offset = end;
    }
    for (; tile < s.max_tiles; ++tile) s.tile_expert[tile] = -1;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = ids[p];
    if (e < 0 || e >= num_experts) continue;
    const int at = atomicAdd(&cursor[e], 1);
    s.perm[at] = p;
    s.tokens[at] = p / top_k;
  }
}

// 64 x 64 output tile per block, 256 threads of 4 x 4 outputs each (rows ty + 16 i, columns
// tx + 16 j: conflict-free shared reads), k in steps of 16 staged through shared memory as f32.
__global__ void __launch_bounds__(256)
    grouped_gemm_kernel(const bf16* a, int64_t lda, const int32_t* a_rows, const bf16* w,
                        const float* bias, int n, int k, const int32_t* c_rows, float* c,
                        int64_t ldc, MoeSort s) {
  const int tile = blockIdx.y;
  const int e = s.tile_expert[tile];
  if (e < 0) return;
  const int m0 = s.tile_start[tile], m_end = s.tile_end[tile];
  const int n0 = blockIdx.x * kTileN;
  const bf16* we = w + static_cast<int64_t>(e) * n * k;
  __shared__ float as[kTileK][kTileM + 4];
  __shared__ float bs[kTileK][kTileN + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  // Loader: each thread stages 4 consecutive k of one row of A and one row of W.
  const int lr = tid / 4, lk = (tid % 4) * 4;
  const bf16* arow = nullptr;
  if (m0 + lr < m_end) {
    const int m = m0 + lr;
    arow = a + static_cast<int64_t>(a_rows ? a_rows[m] : m) * lda;
  }
  const bf16* brow = n0 + lr < n ? we + static_cast<int64_t>(n0 + lr) * k : nullptr;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kTileK) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int kk = k0 + lk + q;
      as[lk + q][lr] = arow && kk < k ? __bfloat162float(arow[kk]) : 0.0f;
      bs[lk + q][lr] = brow && kk < k ? __bfloat162float(brow[kk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i], bv[i] = bs[kk][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= m_end) continue;
    float* crow = c + static_cast<int64_t>(c_rows ? c_rows[m] : m) * ldc;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = n0 + tx + 16 * j;
      if (col < n) crow[col] = acc[i][j] + (bias ? bias[static_cast<int64_t>(e) * n + col] : 0.0f);
    }
  }
}

// The tensor-core form of the same contract: a 64 x 64 output tile per block of four warps, each
// warp 32 x 32 (2 x 2 bf16 WMMA fragments, f32 accumulation), k in steps of 64 staged in shared
// memory with 16-byte loads; the next step's chunks are loaded into registers while the
// tensor cores work on this one, so a decode pass (an expert with a few rows: the weights'
// bytes are the cost) keeps loads in flight. Needs k, lda and both base pointers 16-byte
// aligned (k % 8 == 0); the SIMT kernel above takes every other shape.
constexpr int kTcK = 64, kTcLd = kTcK + 8, kTcLdc = kTileN + 4;
constexpr int kTcThreads = 128;
constexpr int kTcChunks = kTileM * kTcK / 8 / kTcThreads;  // 16-byte chunks per thread per tile

__global__ void __launch_bounds__(kTcThreads)
    grouped_gemm_tc_kernel(const bf16* a, int64_t lda, const int32_t* a_rows, const bf16* w,
                           const float* bias, int n, int k, const int32_t* c_rows, float* c,
                           int64_t ldc, MoeSort s) {
  namespace wmma = nvcuda::wmma;
  static_assert(kTileM == kTileN, "A and W tiles share the chunk layout");
  const int tile = blockIdx.y;
  const int e = s.tile_expert[tile];
  if (e < 0) return;
  const int m0 = s.tile_start[tile], m_end = s.tile_end[tile];
  const int n0 = blockIdx.x * kTileN;
  const bf16* we = w + static_cast<int64_t>(e) * n * k;
  __shared__ __align__(32) bf16 as[kTileM * kTcLd];
  __shared__ __align__(32) bf16 bs[kTileN * kTcLd];
  __shared__ __align__(32) float cs[kTileM * kTcLdc];
  const int tid = threadIdx.x, warp = tid / 32, wm = warp / 2, wn = warp % 2;
  // Chunk q = tid + 128 i of a tile is row q / 8, columns (q % 8) * 8.
  const bf16* arow[kTcChunks];
  const bf16* brow[kTcChunks];
#pragma unroll
  for (int i = 0; i < kTcChunks; ++i) {
    const int r = (tid + kTcThreads * i) / 8, m = m0 + r;
    arow[i] = m < m_end ? a + static_cast<int64_t>(a_rows ? a_rows[m] : m) * lda : nullptr;
    brow[i] = n0 + r < n ? we + static_cast<int64_t>(n0 + r) * k : nullptr;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 ra[kTcChunks], rb[kTcChunks];
  const auto load = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kTcChunks; ++i) {
      const int kk = k0 + ((tid + kTcThreads * i) % 8) * 8;
      ra[i] = arow[i] && kk < k ? *reinterpret_cast<const uint4*>(arow[i] + kk) : zero;
      rb[i] = brow[i] && kk < k ? *reinterpret_cast<const uint4*>(brow[i] + kk) : zero;
    }
  };
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  load(0);
  for (int k0 = 0; k0 < k; k0 += kTcK) {
#pragma unroll
    for (int i = 0; i < kTcChunks; ++i) {
      const int q = tid + kTcThreads * i, at = (q / 8) * kTcLd + (q % 8) * 8;
      *reinterpret_cast<uint4*>(as + at) = ra[i];
      *reinterpret_cast<uint4*>(bs + at) = rb[i];
    }
    __syncthreads();
    if (k0 + kTcK < k) load(k0 + kTcK);  // in flight while the tensor cores run
#pragma unroll
    for (int kk = 0; kk < kTcK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(fa[i], as + (wm * 32 + i * 16) * kTcLd + kk, kTcLd);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(fb[j], bs + (wn * 32 + j * 16) * kTcLd + kk, kTcLd);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(cs + (wm * 32 + i * 16) * kTcLdc + wn * 32 + j * 16, acc[i][j],
                              kTcLdc, wmma::mem_row_major);
  __syncthreads();
  for (int idx = tid; idx < kTileM * kTileN; idx += kTcThreads) {
    const int r = idx / kTileN, col = idx % kTileN, m = m0 + r;
    if (m >= m_end || n0 + col >= n) continue;
    float* crow = c + static_cast<int64_t>(c_rows ? c_rows[m] : m) * ldc;
    crow[n0 + col] =
        cs[r * kTcLdc + col] + (bias ? bias[static_cast<int64_t>(e) * n + n0 + col] : 0.0f);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

__global__ void combine_kernel(const float* y, const float* weights, const int32_t* ids,
                               int num_experts, int64_t total, int top_k, int hidden, View out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / hidden, d = i % hidden;
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const int64_t p = t * top_k + j;
      const int e = ids[p];
      if (e >= 0 && e < num_experts) sum += weights[p] * y[p * hidden + d];
    }
    const int64_t at = t * out.stride + d;
    if (out.dtype == DType::BF16) {
      bf16* o = static_cast<bf16*>(out.data) + at;
      *o = __float2bfloat16_rn(__bfloat162float(*o) + sum);
    } else {
      static_cast<float*>(out.data)[at] += sum;
    }
  }
}

}  // namespace

void moe_sort(const int32_t* ids, int64_t pairs, int top_k, int num_experts, const MoeSort& s,
              cudaStream_t stream) {
  if (num_experts > 1024) throw_error("experts: at most 1024 experts on CUDA");
  if (pairs > INT_MAX) throw_error("experts: too many (token, expert) pairs for one launch");
  moe_sort_kernel<<<1, 1024, 2 * num_experts * sizeof(int), stream>>>(ids, static_cast<int>(pairs),
                                                                      top_k, num_experts, s);
  STRATA_CUDA_CHECK_LAUNCH();
}

void moe_grouped_gemm(const bf16* a, int64_t lda, const int32_t* a_rows, const bf16* w,
                      const float* bias, int n, int k, const int32_t* c_rows, float* c, int64_t ldc,
                      const MoeSort& s, cudaStream_t stream) {
  if (s.max_tiles == 0 || n == 0) return;
  if (s.max_tiles > 65535) throw_error("experts: too many row tiles for one launch");
  const dim3 grid((n + kTileN - 1) / kTileN, static_cast<unsigned>(s.max_tiles));
  if (k % 8 == 0 && lda % 8 == 0 && aligned16(a) && aligned16(w))
    grouped_gemm_tc_kernel<<<grid, kTcThreads, 0, stream>>>(a, lda, a_rows, w, bias, n, k, c_rows,
                                                            c, ldc, s);
  else
    grouped_gemm_kernel<<<grid, 256, 0, stream>>>(a, lda, a_rows, w, bias, n, k, c_rows, c, ldc, s);
  STRATA_CUDA_CHECK_LAUNCH();
}

void moe_combine(const float* y, const float* weights, const int32_t* ids, int num_experts,
                 int64_t tokens, int top_k, int hidden, View out, cudaStream_t stream) {
  const int64_t total = tokens * hidden;
  if (total == 0) return;
  const int64_t blocks = (total + 255) / 256;
  combine_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(
      y, weights, ids, num_experts, total, top_k, hidden, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
