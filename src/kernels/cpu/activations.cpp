// SiLU and the exponential under it, on AVX-512 sixteen at a time and one at a time elsewhere,
// with the same operations in the same order: the result is the same bit for bit on every CPU
// (this file is built with -ffp-contract=off, so no multiply-add is fused on one path only).
// std::exp one value at a time was ~3% of a 2-thread int8 decode step (perf, 2026-12-07: the
// 5,632-wide SwiGLU of every layer, on the pass's own thread while the other thread waited).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/skinny_gemm.h"  // skinny::has_avx512

namespace strata::cpu {

namespace {

// e^x as Cephes' expf computes it: x = n ln2 + r with n = floor(x log2(e) + 1/2) and
// |r| <= ln2 / 2 (ln2 split in two so that n ln2 is exact), e^r by its degree-7 series, and 2^n
// put into the exponent. Within 2 ulp of e^x; x is clamped to [-88.38, 88.38], where e^x is
// 0 (n = -127 gives a zero scale) to ~2.4e38.
constexpr float kExpHi = 88.3762626647949f, kExpLo = -88.3762626647949f;
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

}  // namespace

float exp_approx(float x) {
  x = std::fmin(std::fmax(x, kExpLo), kExpHi);
  const float n = std::floor(x * kLog2e + 0.5f);
  x = x - n * kLn2Hi;
  x = x - n * kLn2Lo;
  const float z = x * x;
  float y = kP0;
  y = y * x + kP1;
  y = y * x + kP2;
  y = y * x + kP3;
  y = y * x + kP4;
  y = y * x + kP5;
  y = y * z + x + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

namespace {

// (GCC 12 warns inside its own AVX-512 intrinsics, whose masked forms start from undefined
// registers: the false positive attention.cpp silences too.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) __m512 exp_avx512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 n = _mm512_roundscale_ps(
      _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  x = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Hi)));
  x = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Lo)));
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 y = _mm512_set1_ps(kP0);
  for (const float p : {kP1, kP2, kP3, kP4, kP5})
    y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(p));
  y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(y, z), x), _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
}

// out[i] = silu(g[i]) * u[i] over whole vectors; returns how many it did.
__attribute__((target("avx512f"))) int64_t silu_and_mul_avx512(const float* g, const float* u,
                                                               int64_t width, float* out) {
  int64_t i = 0;
  for (; i + 16 <= width; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
  }
  return i;
}
#pragma GCC diagnostic pop

}  // namespace

float silu(float x) {
  return x / (1.0f + exp_approx(0.0f - x));
}

void silu_and_mul(const float* gate_up, int64_t rows, int64_t width, float* out) {
  const bool avx512 = skinny::has_avx512();
#pragma omp parallel for if (rows > 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * width;
    const float* u = g + width;
    float* o = out + r * width;
    int64_t i = avx512 ? silu_and_mul_avx512(g, u, width, o) : 0;
    for (; i < width; ++i) o[i] = silu(g[i]) * u[i];
  }
}

}  // namespace strata::cpu
