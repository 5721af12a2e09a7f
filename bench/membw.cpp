// Measures the host's memory bandwidth on all cores, the ceilings a bandwidth-bound decode step
// is compared against in docs/benchmarks.md, two ways:
// - read: every thread sums its part of a buffer through several streams at once (a decode
//   step only reads its weights, and one sequential stream per core does not keep enough
//   misses in flight to reach the memory's rate);
// - copy: bytes read + written per second with non-temporal stores. memcpy is not used: below
//   glibc's non-temporal threshold (3/4 of the shared cache per thread) it writes through the
//   cache, which first reads each destination line, so a third of the traffic went uncounted
//   (the probe used to report 25.6-27.9 GB/s copy where reading alone gives 33).
// Buffers are 1 GiB each (far beyond the 260 MiB L3 of the largest hosts here) and touched once
// by their threads before timing. Best of 5 runs each.
// Usage: strata_membw [streams] (all threads together, at least one per thread; default: the
// best of 1, 2, 4 and 8 per thread, and the count that gave it).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

constexpr size_t kBufferBytes = size_t{1} << 30;
constexpr size_t kVector = 64;  // bytes per load or store
constexpr int kRuns = 5;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, AlignedFree>;

Buffer allocate() {
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, kBufferBytes)));
}

bool has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// (GCC 12 warns inside its own AVX-512 intrinsics and about the accumulator arrays, whose
// used entries are all set: false positives, silenced for these kernels only.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// XOR of every 64-byte vector of [p, p + bytes) over `streams` interleaved ranges read side by
// side (the result keeps the loads from being dropped).
__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, size_t bytes,
                                                        int streams) {
  const size_t part = bytes / streams / kVector * kVector;
  __m512i acc[16];
  for (int s = 0; s < streams; ++s) acc[s] = _mm512_setzero_si512();
  for (size_t off = 0; off < part; off += kVector)
    for (int s = 0; s < streams; ++s)
      acc[s] = _mm512_xor_si512(acc[s], _mm512_load_si512(p + s * part + off));
  for (int s = 1; s < streams; ++s) acc[0] = _mm512_xor_si512(acc[0], acc[s]);
  return static_cast<uint64_t>(_mm512_reduce_or_epi64(acc[0]));
}

// The same with 32-byte loads: 16-byte ones cannot keep up with the memory on some cores (an
// AVX2-only AMD EPYC VM read 24 GB/s with them, 29 GB/s with these, at 8 streams).
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t bytes, int streams) {
  const size_t part = bytes / streams / kVector * kVector;
  __m256i acc[16];
  for (int s = 0; s < streams; ++s) acc[s] = _mm256_setzero_si256();
  for (size_t off = 0; off < part; off += kVector)
    for (int s = 0; s < streams; ++s) {
      const uint8_t* q = p + s * part + off;
      acc[s] = _mm256_xor_si256(acc[s], _mm256_load_si256(reinterpret_cast<const __m256i*>(q)));
      acc[s] =
          _mm256_xor_si256(acc[s], _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32)));
    }
  for (int s = 1; s < streams; ++s) acc[0] = _mm256_xor_si256(acc[0], acc[s]);
  return static_cast<uint64_t>(_mm256_extract_epi64(acc[0], 0));
}

uint64_t read_sse2(const uint8_t* p, size_t bytes, int streams) {
  const size_t part = bytes / streams / kVector * kVector;
  __m128i acc[16];
  for (int s = 0; s < streams; ++s) acc[s] = _mm_setzero_si128();
  for (size_t off = 0; off < part; off += 16)
    for (int s = 0; s < streams; ++s)
      acc[s] = _mm_xor_si128(acc[s],
                             _mm_load_si128(reinterpret_cast<const __m128i*>(p + s * part + off)));
  for (int s = 1; s < streams; ++s) acc[0] = _mm_xor_si128(acc[0], acc[s]);
  return static_cast<uint64_t>(_mm_cvtsi128_si64(acc[0]));
}

// dst = src with stores that bypass the cache (no read of the destination first).
__attribute__((target("avx512f"))) void copy_avx512(uint8_t* dst, const uint8_t* src,
                                                    size_t bytes) {
  for (size_t off = 0; off + kVector <= bytes; off += kVector)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + off), _mm512_load_si512(src + off));
}

void copy_sse2(uint8_t* dst, const uint8_t* src, size_t bytes) {
  for (size_t off = 0; off + 16 <= bytes; off += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + off),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(src + off)));
}

#pragma GCC diagnostic pop

// Seconds of the fastest of kRuns calls of body(thread, begin, bytes) on every thread, each
// thread taking its own contiguous share of the buffer.
template <typename Body>
double best_seconds(Body body) {
  double best = 1e30;
  for (int run = 0; run < kRuns; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    {
      const size_t parts = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t share = kBufferBytes / parts / 4096 * 4096;
      body(id, id * share, share);
    }
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = omp_get_max_threads();
  // Without an argument: the best of 1, 2, 4 and 8 streams per thread (the count a CPU needs to
  // reach its memory's rate differs: 4 in all on one Xeon VM, 16 on an AMD EPYC VM).
  const int wanted = argc > 1 ? std::atoi(argv[1]) : 0;
  if (argc > 1 && (wanted < 1 || wanted > 16 * threads)) {
    std::fprintf(stderr, "error: streams must be in 1..%d (16 per thread), got %s\n", 16 * threads,
                 argv[1]);
    return 1;
  }
  Buffer a = allocate(), b = allocate();
  if (!a || !b) {
    std::fprintf(stderr, "error: cannot allocate two buffers of %zu MiB\n", kBufferBytes >> 20);
    return 1;
  }
  // First touch by the threads that use each part (their NUMA node's memory).
  best_seconds([&](size_t, size_t begin, size_t bytes) {
    std::memset(a.get() + begin, 1, bytes);
    std::memset(b.get() + begin, 0, bytes);
  });
  const size_t share = kBufferBytes / threads / 4096 * 4096;
  const size_t moved = share * threads;
  uint64_t sink = 0;
  double read_s = 1e30;
  int best_streams = 0;
  for (int per_thread : {1, 2, 4, 8}) {
    if (wanted) per_thread = std::clamp((wanted + threads - 1) / threads, 1, 16);
    const double s = best_seconds([&](size_t, size_t begin, size_t bytes) {
      const uint64_t v = has_avx512() ? read_avx512(a.get() + begin, bytes, per_thread)
                         : __builtin_cpu_supports("avx2")
                             ? read_avx2(a.get() + begin, bytes, per_thread)
                             : read_sse2(a.get() + begin, bytes, per_thread);
#pragma omp atomic
      sink ^= v;
    });
    if (s < read_s) read_s = s, best_streams = per_thread * threads;
    if (wanted) break;
  }
  const double copy_s = best_seconds([&](size_t, size_t begin, size_t bytes) {
    if (has_avx512())
      copy_avx512(b.get() + begin, a.get() + begin, bytes);
    else
      copy_sse2(b.get() + begin, a.get() + begin, bytes);
    _mm_sfence();
  });
  std::printf(
      "{\"read_bandwidth_gb_s\": %.2f, \"copy_bandwidth_gb_s\": %.2f, \"threads\": %d, "
      "\"read_streams\": %d, \"buffer_mib\": %zu}\n",
      moved / read_s / 1e9, 2.0 * moved / copy_s / 1e9, threads, best_streams, kBufferBytes >> 20);
  // The sum of bytes all 1 XORed together is 0 or 0x0101...: anything else is a broken read.
  return (sink == 0 || sink == 0x0101010101010101ull) && b.get()[12345] == 1 ? 0 : 1;
}
