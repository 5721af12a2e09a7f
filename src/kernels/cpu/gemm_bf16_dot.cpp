// The AVX512_BF16 kernels of gemm_bf16_dot.h. One kernel, dot_rows<R, J>, serves every shape:
// J weight rows against R input rows, R * J accumulators. Decode (up to 8 rows) streams each
// weight row once for all its rows; prefill walks blocks of input rows that stay in L2, and for
// each group of 4 weight rows (16 KiB at k = 2048, in L1) takes the block's rows 4 at a time.
#include "kernels/cpu/gemm_bf16_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/skinny_gemm.h"

namespace strata::cpu::bf16_dot {

bool available() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
}

namespace {

// (GCC 12 warns inside its own AVX-512 intrinsics, whose masked forms start from undefined
// registers: a known false positive, silenced for these kernels only.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Sixteen f32 as bf16 bits in the low halves of 32-bit lanes, rounded as f32_to_bf16 rounds
// (vcvtneps2bf16 would flush denormals).
__attribute__((target("avx512f,avx512bw"))) inline __m512i round16(__m512i v) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
}

// round_to_bf16 for sixteen values.
__attribute__((target("avx512f,avx512bw"))) void round_store16(const float* x, uint16_t* out) {
  const __m512i h = round16(_mm512_loadu_si512(x));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(h));
}

// y[r * n + j] += x[r, :] . w[j, :] for r < R and the J weight rows j = j0 + jj * row_step (x in
// bf16, row r at x + r k): 32 columns a step, the tail of k as one masked step (zeros past k add
// nothing). Each step also asks for the same columns of the row after each weight row, into L2:
// decode passes read row j + 1 of every stream next (see decode below).
template <int R, int J>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline void dot_rows(
    const uint16_t* x, int64_t k, const uint16_t* w, int64_t j0, int64_t n, float* y,
    int64_t row_step = 1) {
  __m512 acc[J][R];
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) acc[jj][r] = _mm512_setzero_ps();
  const uint16_t* wj = w + j0 * k;
  const int64_t ws = row_step * k;  // between the J weight rows
  int64_t i = 0;
  for (; i + 32 <= k; i += 32)
    for (int jj = 0; jj < J; ++jj) {
      _mm_prefetch(reinterpret_cast<const char*>(wj + jj * ws + i + k), _MM_HINT_T1);
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wj + jj * ws + i);
      for (int r = 0; r < R; ++r)
        acc[jj][r] = _mm512_dpbf16_ps(acc[jj][r], wv, (__m512bh)_mm512_loadu_si512(x + r * k + i));
    }
  if (i < k) {
    const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (k - i)) - 1);
    for (int jj = 0; jj < J; ++jj) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(tail, wj + jj * ws + i);
      for (int r = 0; r < R; ++r)
        acc[jj][r] = _mm512_dpbf16_ps(acc[jj][r], wv,
                                      (__m512bh)_mm512_maskz_loadu_epi16(tail, x + r * k + i));
    }
  }
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) y[r * n + j0 + jj * row_step] += _mm512_reduce_add_ps(acc[jj][r]);
}

#pragma GCC diagnostic pop

// Up to 8 rows: each weight row read once for all of them. Narrow batches take J weight rows a
// pass (independent chains), and those rows are J long streams, not J neighbours: each thread
// cuts its rows into J runs and walks them side by side, row after row, so a hardware prefetcher
// follows each run across rows (J neighbouring rows were J streams one 4 KiB page long each at
// k = 2048). On the Zen 4 VM of 2026-12-06 a microbenchmark of these products read 34-37 GB/s
// with runs against 28-33 with neighbours (a noisy VM); the f32 kernel's runs (skinny_gemm.h)
// won all six interleaved whole-model pairs (docs/benchmarks.md).
template <int R>
void decode(const uint16_t* x, int64_t k, const uint16_t* w, int64_t n, float* y) {
  constexpr int J = R <= 2 ? 4 : R <= 4 ? 2 : 1;  // J * R <= 8 accumulators
  skinny::in_runs<J>(
      n, 2 * k, [&](int64_t j, int64_t run) { dot_rows<R, J>(x, k, w, j, n, y, run); },
      [&](int64_t j) { dot_rows<R, 1>(x, k, w, j, n, y); });
}

constexpr int64_t kMaxDecodeRows = 8;
constexpr int kPrefillRows = 4, kPrefillWeightRows = 4;
// Input rows per block: ~256 KiB of them in bf16, so a block stays in L2 while every weight group
// passes over it.
constexpr int64_t kBlockBytes = int64_t{256} << 10;

void prefill(const uint16_t* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y) {
  const int64_t block_rows = std::max<int64_t>(
      kPrefillRows, kBlockBytes / (2 * std::max<int64_t>(k, 1)) / kPrefillRows * kPrefillRows);
  const int64_t groups = (n + kPrefillWeightRows - 1) / kPrefillWeightRows;
#pragma omp parallel
  for (int64_t r0 = 0; r0 < m; r0 += block_rows) {
    const int64_t r1 = std::min(m, r0 + block_rows);
    // Dynamic: on a 2-core VM one core is often slower for a while, and with a static split the
    // other waited at every block's barrier (perf of a 512-token bf16 prefill: libgomp's wait
    // 5.8-9.1% of the samples static, 3.8% dynamic; each sum is the same whoever computes it).
#pragma omp for schedule(dynamic, 16)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t j0 = g * kPrefillWeightRows;
      const int64_t j1 = std::min(n, j0 + kPrefillWeightRows);
      for (int64_t r = r0; r < r1; r += kPrefillRows) {
        const int64_t rows = std::min<int64_t>(kPrefillRows, r1 - r);
        if (rows == kPrefillRows && j1 - j0 == kPrefillWeightRows) {
          dot_rows<kPrefillRows, kPrefillWeightRows>(x + r * k, k, w, j0, n, y + r * n);
          continue;
        }
        for (int64_t j = j0; j < j1; ++j)
          skinny::with_rows(rows,
                            [&]<int R>() { dot_rows<R, 1>(x + r * k, k, w, j, n, y + r * n); });
      }
    }
  }
}

}  // namespace

void round_to_bf16(const float* x, int64_t count, uint16_t* out) {
  int64_t i = 0;
  if (available())
    for (; i + 16 <= count; i += 16) round_store16(x + i, out + i);
  for (; i < count; ++i) out[i] = f32_to_bf16(x[i]);
}

void linear(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y) {
  // Kept between calls: a decode step rounds its rows for every projection.
  thread_local std::vector<uint16_t> rounded;
  rounded.resize(static_cast<size_t>(m * k));
  round_to_bf16(x, m * k, rounded.data());
  if (m > kMaxDecodeRows) return prefill(rounded.data(), m, k, w, n, y);
  skinny::with_rows(m, [&]<int R>() { decode<R>(rounded.data(), k, w, n, y); });
}

}  // namespace strata::cpu::bf16_dot
