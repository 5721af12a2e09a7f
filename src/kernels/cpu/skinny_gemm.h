#pragma once
// The decode-shaped product both weight dtypes share (gemm.cpp: f32, gemm_bf16.cpp: bf16):
// y[r, j] += x[r, :] . w[j, :] for R <= 8 rows, each weight row read once for all the rows, the
// weight rows split across the OpenMP threads; and the CPU feature checks the kernels share.
// Internal to kernels/cpu.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/dtype.h"

namespace strata::cpu::skinny {

inline bool has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
inline bool has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

inline float widen(float w) {
  return w;
}
inline float widen(uint16_t w) {
  return bf16_to_f32(w);
}

// Splits [0, n) into chunks taken as threads free up, and each chunk into J runs of equal length,
// walked side by side: pass(j, run) covers items j, j + run, ..., j + (J - 1) run, for j over the
// first run; single(j) takes the chunk's remainder. The decode kernels' rows (and int8's groups)
// go through it so that each core reads J long streams (see avx2 below). Chunks, not one share a
// thread: a core whose reads a step slowed held the other at the barrier (on a 2-core VM the two
// threads spent ~9% of an int8 decode step waiting for each other in turn, perf). Each chunk is a
// share of what is left, OpenMP's guided schedule by hand (the runs need the chunk's bounds):
// early chunks long, for long streams; the last ones short, so that the thread finishing last
// waits for at most kMinChunkBytes of the other's reads. Which thread computes a row does not
// change its sum.
constexpr int64_t kMinChunkBytes = int64_t{256} << 10;
template <int J, typename Pass, typename Single>
void in_runs(int64_t n, int64_t item_bytes, Pass&& pass, Single&& single) {
  const int64_t min_chunk =
      std::max<int64_t>(J, kMinChunkBytes / std::max<int64_t>(item_bytes, 1) / J * J);
  std::atomic<int64_t> next{0};
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    for (;;) {
      int64_t a = next.load(std::memory_order_relaxed), b = a;
      do {
        if (a >= n) break;
        b = std::min(n, a + std::max(min_chunk, (n - a) / (2 * threads)));
      } while (!next.compare_exchange_weak(a, b, std::memory_order_relaxed));
      if (a >= n) break;
      const int64_t run = (b - a) / J;
      for (int64_t j = a; j < a + run; ++j) pass(j, run);
      for (int64_t j = a + run * J; j < b; ++j) single(j);
    }
  }
}

// Eight weights as f32 (a bf16 value is the upper half of an f32: a 16-bit shift).
__attribute__((target("avx2,fma"))) inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
__attribute__((target("avx2,fma"))) inline __m256 load8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// J weight rows (j0..j0+J-1) against R input rows, one accumulator per output: every output's
// sum is formed in the same order whatever R and J are, so a row's result does not depend on
// the batch it is decoded in. J > 1 is for narrow batches: one row alone was a single chain of
// dependent FMAs (bf16: 16 bytes of weights per FMA latency, below the memory's rate); four
// weight rows at once are four chains and four weight streams in flight.
//
// The J weight rows are j0 + jj * row_step; each step asks for the same columns of the row after
// each of them, into L2 (see avx2 below for why).
template <int R, int J, typename W>
__attribute__((target("avx2,fma"))) inline void rows_avx2(const float* x, int64_t k, const W* w,
                                                          int64_t j0, int64_t n, float* y,
                                                          int64_t row_step = 1) {
  __m256 acc[J][R];
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) acc[jj][r] = _mm256_setzero_ps();
  const W* wj = w + j0 * k;
  const int64_t ws = row_step * k;
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int jj = 0; jj < J; ++jj) {
      if (i % (64 / sizeof(W)) == 0)  // once a cache line
        _mm_prefetch(reinterpret_cast<const char*>(wj + jj * ws + i + k), _MM_HINT_T1);
      const __m256 wv = load8(wj + jj * ws + i);
      for (int r = 0; r < R; ++r)
        acc[jj][r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k + i), acc[jj][r]);
    }
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) {
      __m128 s =
          _mm_add_ps(_mm256_castps256_ps128(acc[jj][r]), _mm256_extractf128_ps(acc[jj][r], 1));
      s = _mm_hadd_ps(s, s);
      s = _mm_hadd_ps(s, s);
      float v = _mm_cvtss_f32(s);
      for (int64_t t = i; t < k; ++t) v += widen(wj[jj * ws + t]) * x[r * k + t];
      y[r * n + j0 + jj * row_step] += v;
    }
}

// The J weight rows of a pass are J long streams, not J neighbours: each thread cuts its rows
// into J runs and walks them side by side, row after row, so a hardware prefetcher follows each
// run across rows (J neighbouring rows were J streams one or two 4 KiB pages long each). One
// input row takes eight runs: against four, 5 of 6 alternated whole-model pairs were faster on
// the Zen 4 VM (median ~103 -> ~90 ms a batch-1 f32 step; strata_membw there reads most with
// eight streams a core).
template <int R, typename W>
__attribute__((target("avx2,fma"))) void avx2(const float* x, int64_t k, const W* w, int64_t n,
                                              float* y) {
  constexpr int J = R == 1 ? 8 : R == 2 ? 4 : R <= 4 ? 2 : 1;  // J * R <= 8 of the 16 registers
  in_runs<J>(
      n, k * int64_t{sizeof(W)},
      [&](int64_t j, int64_t run) { rows_avx2<R, J>(x, k, w, j, n, y, run); },
      [&](int64_t j) { rows_avx2<R, 1>(x, k, w, j, n, y); });
}

// Any CPU, any row count.
template <typename W>
void portable(const float* x, int64_t m, int64_t k, const W* w, int64_t n, float* y) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    const W* wj = w + j * k;
    for (int64_t r = 0; r < m; ++r) {
      float v = 0.0f;
      for (int64_t t = 0; t < k; ++t) v += widen(wj[t]) * x[r * k + t];
      y[r * n + j] += v;
    }
  }
}

// f.template operator()<R>() with R = m, 1..8 (a kernel instantiated per row count keeps its
// accumulators in registers).
template <typename F>
void with_rows(int64_t m, F&& f) {
  switch (m) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    case 4:
      return f.template operator()<4>();
    case 5:
      return f.template operator()<5>();
    case 6:
      return f.template operator()<6>();
    case 7:
      return f.template operator()<7>();
    default:
      return f.template operator()<8>();
  }
}

}  // namespace strata::cpu::skinny
