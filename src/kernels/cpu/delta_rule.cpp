#include "kernels/cpu/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::cpu {

namespace {

// The l2-normalized q (times 1/sqrt(k_dim)) and k of value head h for tokens [t0, t0 + n).
void normalized_qk(const DeltaRuleArgs& a, int h, int t0, int n, std::vector<float>& q,
                   std::vector<float>& k) {
  const int dk = a.k_dim, kh = h / (a.num_v_heads / a.num_k_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  q.assign(static_cast<size_t>(n) * dk, 0.0f);
  k.assign(static_cast<size_t>(n) * dk, 0.0f);
  for (int s = 0; s < n; ++s) {
    const float* qs = a.q + (t0 + s) * a.stride + kh * dk;
    const float* ks = a.k + (t0 + s) * a.stride + kh * dk;
    double qq = 0, kk = 0;
    for (int i = 0; i < dk; ++i) qq += double{qs[i]} * qs[i], kk += double{ks[i]} * ks[i];
    const float qn = scale / std::sqrt(static_cast<float>(qq) + 1e-6f);
    const float kn = 1.0f / std::sqrt(static_cast<float>(kk) + 1e-6f);
    for (int i = 0; i < dk; ++i) q[s * dk + i] = qs[i] * qn, k[s * dk + i] = ks[i] * kn;
  }
}

}  // namespace

void delta_rule_sequential(const DeltaRuleArgs& a, float* state, float* y) {
  const int dk = a.k_dim, dv = a.v_dim, H = a.num_v_heads;
  std::vector<float> q, k;
  std::vector<double> mem(dv), out(dv);  // each state entry rounds once per token
  for (int h = 0; h < H; ++h) {
    float* S = state + static_cast<int64_t>(h) * dk * dv;
    normalized_qk(a, h, 0, a.len, q, k);
    for (int t = 0; t < a.len; ++t) {
      const double decay = std::exp(double{a.g[t * H + h]}), beta = a.beta[t * H + h];
      const float* kt = k.data() + t * dk;
      const float* qt = q.data() + t * dk;
      const float* vt = a.v + t * a.stride + h * dv;
      std::fill(mem.begin(), mem.end(), 0.0);
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dv; ++j) mem[j] += decay * S[i * dv + j] * kt[i];
      for (int j = 0; j < dv; ++j) mem[j] = (vt[j] - mem[j]) * beta;  // the delta
      std::fill(out.begin(), out.end(), 0.0);
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dv; ++j) {
          const double s = decay * S[i * dv + j] + double{kt[i]} * mem[j];
          S[i * dv + j] = static_cast<float>(s);
          out[j] += s * qt[i];
        }
      float* yt = y + static_cast<int64_t>(t) * H * dv + h * dv;
      for (int j = 0; j < dv; ++j) yt[j] = static_cast<float>(out[j]);
    }
  }
}

void delta_rule_chunked(const DeltaRuleArgs& a, int chunk_size, float* state, float* y) {
  const int dk = a.k_dim, dv = a.v_dim, H = a.num_v_heads;
  // Inside a chunk in double: the triangular solve amplifies rounding, and results must not
  // depend on where a pass (or a cached prefix) puts the chunk boundaries.
  std::vector<float> q, k;
  std::vector<double> G, A, U, W, vnew, row;
  for (int h = 0; h < H; ++h) {
    float* S = state + static_cast<int64_t>(h) * dk * dv;
    for (int t0 = 0; t0 < a.len; t0 += chunk_size) {
      const int n = std::min(chunk_size, a.len - t0);
      normalized_qk(a, h, t0, n, q, k);
      G.assign(n, 0.0);  // the cumulative log decay inside the chunk
      for (int s = 0; s < n; ++s) G[s] = (s ? G[s - 1] : 0.0) + a.g[(t0 + s) * H + h];
      auto beta = [&](int s) { return double{a.beta[(t0 + s) * H + h]}; };
      auto kdot = [&](const float* x, int m) {
        double d = 0;
        for (int i = 0; i < dk; ++i) d += double{x[i]} * k[m * dk + i];
        return d;
      };
      // A = -(beta_s k_s . k_m) exp(G_s - G_m) strictly below the diagonal, then T = (I - A)'s
      // inverse-like solve by forward substitution, row by row, as transformers does.
      A.assign(static_cast<size_t>(n) * n, 0.0);
      for (int s = 0; s < n; ++s)
        for (int m = 0; m < s; ++m)
          A[s * n + m] = -beta(s) * kdot(k.data() + s * dk, m) * std::exp(G[s] - G[m]);
      for (int s = 1; s < n; ++s) {
        row.assign(A.begin() + s * n, A.begin() + s * n + s);
        for (int m = 0; m < s; ++m) {
          double acc = row[m];
          for (int p = m + 1; p < s; ++p) acc += row[p] * A[p * n + m];
          A[s * n + m] = acc;
        }
      }
      for (int s = 0; s < n; ++s) A[s * n + s] = 1.0;
      // U = T (beta v), W = T (beta exp(G) k): the chunk's values and keys with the in-chunk
      // updates folded in.
      U.assign(static_cast<size_t>(n) * dv, 0.0);
      W.assign(static_cast<size_t>(n) * dk, 0.0);
      for (int s = 0; s < n; ++s)
        for (int m = 0; m <= s; ++m) {
          const double t = A[s * n + m] * beta(m);
          const float* vm = a.v + (t0 + m) * a.stride + h * dv;
          for (int j = 0; j < dv; ++j) U[s * dv + j] += t * vm[j];
          const double te = t * std::exp(G[m]);
          for (int i = 0; i < dk; ++i) W[s * dk + i] += te * k[m * dk + i];
        }
      // v_new = U - W S (what the state does not yet predict); out = exp(G) q S + the causal,
      // decay-weighted (q k^T) v_new inside the chunk.
      vnew.assign(static_cast<size_t>(n) * dv, 0.0);
      for (int s = 0; s < n; ++s) {
        for (int j = 0; j < dv; ++j) vnew[s * dv + j] = U[s * dv + j];
        for (int i = 0; i < dk; ++i)
          for (int j = 0; j < dv; ++j) vnew[s * dv + j] -= W[s * dk + i] * S[i * dv + j];
      }
      std::vector<double> out(dv);
      for (int s = 0; s < n; ++s) {
        const float* qs = q.data() + s * dk;
        const double e = std::exp(G[s]);
        std::fill(out.begin(), out.end(), 0.0);
        for (int i = 0; i < dk; ++i)
          for (int j = 0; j < dv; ++j) out[j] += e * qs[i] * S[i * dv + j];
        for (int m = 0; m <= s; ++m) {
          const double w = kdot(qs, m) * std::exp(G[s] - G[m]);
          for (int j = 0; j < dv; ++j) out[j] += w * vnew[m * dv + j];
        }
        float* ys = y + static_cast<int64_t>(t0 + s) * H * dv + h * dv;
        for (int j = 0; j < dv; ++j) ys[j] = static_cast<float>(out[j]);
      }
      // S = exp(G_last) S + sum_m exp(G_last - G_m) k_m v_new_m^T
      const double last = G[n - 1];
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dv; ++j) {
          double acc = std::exp(last) * S[i * dv + j];
          for (int m = 0; m < n; ++m)
            acc += std::exp(last - G[m]) * k[m * dk + i] * vnew[m * dv + j];
          S[i * dv + j] = static_cast<float>(acc);
        }
    }
  }
}

}  // namespace strata::cpu
