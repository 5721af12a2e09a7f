#include "kernels/cpu/mamba.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/ops.h"

namespace strata::cpu {

void causal_conv1d(const float* x, int64_t x_stride, int len, int channels, const float* weight,
                   const float* bias, int kernel, float* state, float* out, bool silu_act) {
  const int width = kernel - 1;
#pragma omp parallel for if (int64_t{len} * channels > 4096)
  for (int c = 0; c < channels; ++c) {
    const float* w = weight + static_cast<int64_t>(c) * kernel;
    float* st = state + static_cast<int64_t>(c) * width;
    // Input at time j relative to the first new row: state for j < 0, x otherwise.
    auto input = [&](int j) { return j < 0 ? st[width + j] : x[j * x_stride + c]; };
    for (int t = 0; t < len; ++t) {
      float acc = bias ? bias[c] : 0.0f;
      for (int k = 0; k < kernel; ++k) acc += w[k] * input(t - width + k);
      out[static_cast<int64_t>(t) * channels + c] = silu_act ? silu(acc) : acc;
    }
    // Keep the last `width` inputs of (state | x).
    std::vector<float> last(width);
    for (int j = 0; j < width; ++j) last[j] = input(len - width + j);
    std::memcpy(st, last.data(), sizeof(float) * width);
  }
}

void ssm_scan_sequential(const SsmScanArgs& a, float* state, float* y) {
  const int P = a.head_dim, N = a.state_size, heads_per_group = a.num_heads / a.n_groups;
  const int64_t y_stride = int64_t{a.num_heads} * P;
#pragma omp parallel for if (a.num_heads > 1 && int64_t{a.len} * P * N > 4096)
  for (int h = 0; h < a.num_heads; ++h) {
    const int g = h / heads_per_group;
    float* S = state + static_cast<int64_t>(h) * P * N;
    for (int t = 0; t < a.len; ++t) {
      const float dt = a.dt[static_cast<int64_t>(t) * a.num_heads + h];
      const float decay = std::exp(dt * a.A[h]);
      const float* x = a.x + t * a.stride + static_cast<int64_t>(h) * P;
      const float* B = a.B + t * a.stride + static_cast<int64_t>(g) * N;
      const float* C = a.C + t * a.stride + static_cast<int64_t>(g) * N;
      float* yt = y + t * y_stride + static_cast<int64_t>(h) * P;
      for (int p = 0; p < P; ++p) {
        float* s = S + static_cast<int64_t>(p) * N;
        const float dx = dt * x[p];
        float acc = 0.0f;
        for (int n = 0; n < N; ++n) {
          s[n] = decay * s[n] + dx * B[n];
          acc += s[n] * C[n];
        }
        yt[p] = acc + a.D[h] * x[p];
      }
    }
  }
}

void ssm_scan_chunked(const SsmScanArgs& a, int chunk_size, float* state, float* y) {
  const int P = a.head_dim, N = a.state_size, heads_per_group = a.num_heads / a.n_groups;
  const int64_t y_stride = int64_t{a.num_heads} * P;
#pragma omp parallel if (a.num_heads > 1 && int64_t{a.len} * P * N > 4096)
  {
    // Per-chunk scratch: cumulative log-decay, the decay-masked C B^T matrix, weights for the
    // state update.
    std::vector<float> cum(chunk_size), M(static_cast<size_t>(chunk_size) * chunk_size),
        w(chunk_size);
#pragma omp for
    for (int h = 0; h < a.num_heads; ++h) {
      const int g = h / heads_per_group;
      float* S = state + static_cast<int64_t>(h) * P * N;
      auto x_at = [&](int t) { return a.x + t * a.stride + static_cast<int64_t>(h) * P; };
      auto B_at = [&](int t) { return a.B + t * a.stride + static_cast<int64_t>(g) * N; };
      auto C_at = [&](int t) { return a.C + t * a.stride + static_cast<int64_t>(g) * N; };
      auto dt_at = [&](int t) { return a.dt[static_cast<int64_t>(t) * a.num_heads + h]; };
      for (int c0 = 0; c0 < a.len; c0 += chunk_size) {
        const int L = std::min(chunk_size, a.len - c0);
        // cum[i] = sum_{j<=i} dt_j A: the log-decay from the chunk start through token i.
        float run = 0.0f;
        for (int i = 0; i < L; ++i) cum[i] = run += dt_at(c0 + i) * a.A[h];
        // M[i, j] = (C_i . B_j) exp(cum_i - cum_j) dt_j for j <= i.
        for (int i = 0; i < L; ++i) {
          const float* Ci = C_at(c0 + i);
          for (int j = 0; j <= i; ++j) {
            const float* Bj = B_at(c0 + j);
            float cb = 0.0f;
            for (int n = 0; n < N; ++n) cb += Ci[n] * Bj[n];
            M[static_cast<size_t>(i) * L + j] = cb * std::exp(cum[i] - cum[j]) * dt_at(c0 + j);
          }
        }
        // y_i = M x (inside the chunk) + exp(cum_i) C_i S (the state it starts from) + D x_i.
        for (int i = 0; i < L; ++i) {
          const float* Ci = C_at(c0 + i);
          const float* xi = x_at(c0 + i);
          const float carry = std::exp(cum[i]);
          float* yi = y + (c0 + i) * y_stride + static_cast<int64_t>(h) * P;
          for (int p = 0; p < P; ++p) {
            const float* s = S + static_cast<int64_t>(p) * N;
            float from_state = 0.0f;
            for (int n = 0; n < N; ++n) from_state += Ci[n] * s[n];
            float within = 0.0f;
            for (int j = 0; j <= i; ++j)
              within += M[static_cast<size_t>(i) * L + j] * x_at(c0 + j)[p];
            yi[p] = within + carry * from_state + a.D[h] * xi[p];
          }
        }
        // S <- exp(cum_last) S + sum_j exp(cum_last - cum_j) dt_j x_j B_j^T
        const float total = cum[L - 1];
        for (int j = 0; j < L; ++j) w[j] = std::exp(total - cum[j]) * dt_at(c0 + j);
        const float chunk_decay = std::exp(total);
        for (int p = 0; p < P; ++p) {
          float* s = S + static_cast<int64_t>(p) * N;
          for (int n = 0; n < N; ++n) s[n] *= chunk_decay;
          for (int j = 0; j < L; ++j) {
            const float wx = w[j] * x_at(c0 + j)[p];
            const float* Bj = B_at(c0 + j);
            for (int n = 0; n < N; ++n) s[n] += wx * Bj[n];
          }
        }
      }
    }
  }
}

void gated_rms_norm(float* y, const float* z, int64_t z_stride, int64_t rows, int width, int groups,
                    const float* weight, float eps, bool norm_before_gate, const float* sums,
                    int64_t sums_stride, int64_t group_width) {
  const int group_size = width / groups;
#pragma omp parallel for if (rows > 16)
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * width;
    const float* zr = z + r * z_stride;
    if (!norm_before_gate || !weight)
      for (int i = 0; i < width; ++i) yr[i] *= silu(zr[i]);
    if (!weight) continue;
    for (int g = 0; g < groups; ++g) {
      float* v = yr + static_cast<int64_t>(g) * group_size;
      double ss = 0.0;
      if (sums) {
        ss = sums[r * sums_stride + g];
      } else {
        for (int i = 0; i < group_size; ++i) ss += static_cast<double>(v[i]) * v[i];
      }
      const double n = sums ? static_cast<double>(group_width) : group_size;
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
      for (int i = 0; i < group_size; ++i) v[i] = v[i] * inv * weight[g * group_size + i];
    }
    if (norm_before_gate)
      for (int i = 0; i < width; ++i) yr[i] *= silu(zr[i]);
  }
}

void gated_sum_squares(const float* y, const float* z, int64_t z_stride, int64_t rows, int width,
                       int groups, bool norm_before_gate, float* sums, int64_t sums_stride) {
  const int group_size = width / groups;
#pragma omp parallel for if (rows > 16)
  for (int64_t r = 0; r < rows; ++r)
    for (int g = 0; g < groups; ++g) {
      double ss = 0.0;
      for (int i = g * group_size; i < (g + 1) * group_size; ++i) {
        const float v =
            norm_before_gate ? y[r * width + i] : y[r * width + i] * silu(z[r * z_stride + i]);
        ss += static_cast<double>(v) * v;
      }
      sums[r * sums_stride + g] = static_cast<float>(ss);
    }
}

}  // namespace strata::cpu
