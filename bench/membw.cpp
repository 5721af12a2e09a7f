// Measures the host's memory copy bandwidth (bytes read + written per second) on all cores,
// the ceiling a bandwidth-bound decode step is compared against in docs/benchmarks.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  const size_t n = size_t{1} << 28;  // 1 GiB of floats per buffer: far beyond any cache
  std::vector<float> a(n / 4, 1.0f), b(n / 4, 0.0f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    {
      const size_t parts = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t chunk = a.size() / parts;
      std::memcpy(b.data() + id * chunk, a.data() + id * chunk, chunk * sizeof(float));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n / s);  // read + write
  }
  std::printf("{\"copy_bandwidth_gb_s\": %.2f, \"threads\": %d}\n", best / 1e9,
              omp_get_max_threads());
  return b[12345] == 1.0f ? 0 : 1;
}
