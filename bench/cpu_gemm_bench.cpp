// The CPU weight products alone (kernels/cpu/gemm.h), at the shapes of a decode step of
// bench/configs/llama-2048x16 (hidden 2048, intermediate 5632, vocabulary 32000): f32, bf16 and
// int8 weights, at 1 and 8 (decode) and 128 (a prefill chunk) input rows. Most products'
// weights (~50 MB and more, past the last-level cache) are read from memory on every call. Prints
// one JSON line per case: the best and median of the timed calls (the best is the figure a busy
// machine distorts least), the weight bytes read per second and the multiply-add rate (2 ops each)
// at the best. Levels this CPU lacks (AVX-512, AMX) are left out. Usage: strata_cpu_gemm_bench
// [threads (default: all)] [calls (default 20)]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_weights.h"

namespace {

using strata::cpu::Simd;

struct Shape {
  const char* name;
  int64_t n, k;
};

// One decode step's products, in the order a layer runs them; gate|up fused as the model does.
constexpr Shape kShapes[] = {{"qkv", 2048 * 3, 2048},
                             {"o", 2048, 2048},
                             {"gate_up", 5632 * 2, 2048},
                             {"down", 2048, 5632},
                             {"lm_head", 32000, 2048}};

const char* simd_name(Simd s) {
  switch (s) {
    case Simd::Best:
      return "best";
    case Simd::Amx:
      return "amx";
    case Simd::Avx512Bf16:
      return "avx512_bf16";
    case Simd::Avx512:
      return "avx512";
    case Simd::Avx2:
      return "avx2";
    case Simd::Portable:
      return "portable";
  }
  return "?";
}

template <typename F>
void time_case(const char* dtype, Simd simd, const Shape& s, int64_t m, double weight_bytes,
               int calls, F&& product) {
  product();  // untimed: first touch, thread start-up
  std::vector<double> ms;
  for (int c = 0; c < calls; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    product();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "{\"dtype\":\"%s\",\"simd\":\"%s\",\"product\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
      "\"best_ms\":%.4f,\"median_ms\":%.4f,\"weight_gb_s\":%.2f,\"gop_s\":%.1f}\n",
      dtype, simd_name(simd), s.name, static_cast<long long>(m), static_cast<long long>(s.n),
      static_cast<long long>(s.k), ms.front(), ms[ms.size() / 2], weight_bytes / ms.front() / 1e6,
      2.0 * m * s.n * s.k / ms.front() / 1e6);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  const int calls = argc > 2 ? std::atoi(argv[2]) : 20;
  if (threads < 1 || calls < 1) {
    std::fprintf(stderr, "error: usage: strata_cpu_gemm_bench [threads >= 1] [calls >= 1]\n");
    return 2;
  }
  strata::cpu::set_num_threads(threads);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : kShapes) {
    std::vector<float> w(static_cast<size_t>(s.n * s.k));
    for (float& v : w) v = dist(rng);
    std::vector<uint16_t> w_bf16(w.size());
    for (size_t i = 0; i < w.size(); ++i) w_bf16[i] = strata::f32_to_bf16(w[i]);
    namespace q8 = strata::cpu::int8;
    std::vector<uint8_t> w_q8(static_cast<size_t>(q8::groups(s.n) * q8::group_bytes(s.k)));
    for (int64_t g = 0; g < q8::groups(s.n); ++g)
      q8::quantize_group(w.data() + g * q8::kGroupRows * s.k,
                         std::min(q8::kGroupRows, s.n - g * q8::kGroupRows), s.k,
                         w_q8.data() + g * q8::group_bytes(s.k));
    for (int64_t m : {1, 8, 128}) {
      std::vector<float> x(static_cast<size_t>(m * s.k)), y(static_cast<size_t>(m * s.n));
      for (float& v : x) v = dist(rng);
      time_case("f32", Simd::Best, s, m, 4.0 * s.n * s.k, calls,
                [&] { strata::cpu::linear(x.data(), m, s.k, w.data(), s.n, nullptr, y.data()); });
      for (Simd simd : {Simd::Amx, Simd::Avx512Bf16, Simd::Avx512, Simd::Avx2}) {
        // Levels this CPU lacks fall back to the next (the kernels' rule): not timed twice.
        if (simd != Simd::Avx2 && !__builtin_cpu_supports("avx512f")) continue;
        if (simd == Simd::Avx512Bf16 && !__builtin_cpu_supports("avx512bf16")) continue;
        if (simd == Simd::Amx && m <= 8) continue;              // AMX takes only prefill shapes
        if (simd != Simd::Amx || strata::cpu::amx::has_bf16())  // AMX-BF16 tiles, where present
          time_case("bf16", simd, s, m, 2.0 * s.n * s.k, calls, [&] {
            strata::cpu::linear_bf16(x.data(), m, s.k, w_bf16.data(), s.n, nullptr, y.data(), simd);
          });
        if (simd == Simd::Avx512Bf16) continue;  // int8 takes it as Avx512 (VNNI)
        time_case("int8", simd, s, m, static_cast<double>(w_q8.size()), calls, [&] {
          strata::cpu::linear_int8(x.data(), m, s.k, w_q8.data(), 0, s.n, nullptr, y.data(), simd);
        });
      }
    }
  }
  return 0;
}
