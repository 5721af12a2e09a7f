#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>

#include "core/dummy_random.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/tensor_ops.h"
#include "kernels/gated_activation_math.h"

namespace strata::cuda {

namespace {

using bf16 = __nv_bfloat16;

// Storage dtype is a runtime property of a tensor; a branch per element costs little next to
// the memory traffic of these kernels and is uniform across a warp.
__device__ __forceinline__ float load(const View& v, int64_t i) {
  if (v.dtype == DType::BF16) return __bfloat162float(static_cast<const bf16*>(v.data)[i]);
  if (v.dtype == DType::I32) return static_cast<float>(static_cast<const int32_t*>(v.data)[i]);
  return static_cast<const float*>(v.data)[i];
}

__device__ __forceinline__ void store(const View& v, int64_t i, float x) {
  if (v.dtype == DType::BF16)
    static_cast<bf16*>(v.data)[i] = __float2bfloat16_rn(x);
  else if (v.dtype == DType::I32)
    static_cast<int32_t*>(v.data)[i] = static_cast<int32_t>(x);
  else
    static_cast<float*>(v.data)[i] = x;
}

__device__ __forceinline__ float act_fn(Act act, float x) {
  switch (act) {
    case Act::Silu:
      return x / (1.0f + expf(-x));
    case Act::Gelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Act::GeluTanh: {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
    case Act::Relu2:
      return x > 0.0f ? x * x : 0.0f;
    case Act::ClampedSwiglu:  // gated only (gated_fn); never reached alone
      break;
  }
  return x;
}

__device__ __forceinline__ float gated_fn(Act act, float gate, float up) {
  return act == Act::ClampedSwiglu ? clamped_swiglu(gate, up) : act_fn(act, gate) * up;
}

#define STRATA_GRID_STRIDE(i, total)                                                         \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (total); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void copy_kernel(View src, View dst, int64_t total, int64_t cols) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t r = i / cols, c = i % cols;
    store(dst, r * dst.stride + c, load(src, r * src.stride + c));
  }
}

__global__ void fill_kernel(View t, int64_t total, int64_t cols, float value) {
  STRATA_GRID_STRIDE(i, total) {
    store(t, (i / cols) * t.stride + i % cols, value);
  }
}

__global__ void fill_dummy_kernel(View t, int64_t n, uint64_t seed, float stddev) {
  STRATA_GRID_STRIDE(i, n) {
    store(t, i, dummy_value(seed, static_cast<uint64_t>(i), stddev));
  }
}

__global__ void add_kernel(View x, View y, int64_t total, int64_t cols) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t r = i / cols, c = i % cols;
    store(x, r * x.stride + c, load(x, r * x.stride + c) + load(y, r * y.stride + c));
  }
}

__global__ void mul_kernel(View a, View b, bool per_row, bool sigmoid_b, View out, int64_t total,
                           int64_t cols) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t r = i / cols, c = i % cols;
    const float f = load(b, r * b.stride + (per_row ? 0 : c));
    store(out, r * out.stride + c,
          load(a, r * a.stride + c) * (sigmoid_b ? 1.0f / (1.0f + __expf(-f)) : f));
  }
}

__global__ void scale_kernel(View x, int64_t total, int64_t cols, float s) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t at = (i / cols) * x.stride + i % cols;
    store(x, at, load(x, at) * s);
  }
}

__global__ void add_bias_kernel(View y, View bias, int64_t total, int64_t cols) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t at = (i / cols) * y.stride + i % cols;
    store(y, at, load(y, at) + load(bias, i % cols));
  }
}

// One warp per (row, group): per-head norms (64..576 wide) are too narrow for a block.
__global__ void rms_norm_warp_kernel(View x, View w, int64_t items, int64_t groups, int width,
                                     float eps, float offset, View out) {
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(warps) + threadIdx.x / 32; item < items;
       item += static_cast<int64_t>(gridDim.x) * warps) {
    const int64_t r = item / groups, g = item % groups;
    const int64_t xi = r * x.stride + g * width, oi = r * out.stride + g * width;
    float ss = 0.0f;
    for (int i = lane; i < width; i += 32) {
      const float v = load(x, xi + i);
      ss += v * v;
    }
    const float inv = rsqrtf(warp_sum(ss) / width + eps);
    for (int i = lane; i < width; i += 32)
      store(out, oi + i, load(x, xi + i) * inv * (load(w, i) + offset));
  }
}

// One block per (row, group): whole-row norms of the hidden size.
__global__ void rms_norm_block_kernel(View x, View w, int64_t groups, int width, float eps,
                                      float offset, View out) {
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
  const int64_t xi = r * x.stride + g * width, oi = r * out.stride + g * width;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = load(x, xi + i);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / width + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    store(out, oi + i, load(x, xi + i) * inv * (load(w, i) + offset));
}

// Four consecutive elements (i a multiple of 4, the row aligned to them): one 16-byte f32 or
// 8-byte bf16 access instead of four.
__device__ __forceinline__ float4 load4(const View& v, int64_t i) {
  if (v.dtype == DType::BF16) {
    const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const bf16*>(v.data) + i);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  return *reinterpret_cast<const float4*>(static_cast<const float*>(v.data) + i);
}

__device__ __forceinline__ void store4(const View& v, int64_t i, float4 x) {
  if (v.dtype == DType::BF16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
    uint2 raw;
    raw.x = *reinterpret_cast<const uint32_t*>(&lo);
    raw.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(static_cast<bf16*>(v.data) + i) = raw;
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(v.data) + i) = x;
  }
}

constexpr int kRegisterNormThreads = 256, kRegisterNormSlices = 8;  // rows up to 8192 wide

// One block per whole row, the row held in registers between the sum of squares and the
// scaling: x is read once, 4 elements per access. At batch 1 the norm is a latency (the
// two-pass block kernel took 6.1 us on a 4096-wide row), so fewer, wider loads are the point.
__global__ void __launch_bounds__(kRegisterNormThreads)
    rms_norm_register_kernel(View x, View w, int width, float eps, float offset, View out) {
  const int64_t r = blockIdx.x;
  float4 v[kRegisterNormSlices];
  float ss = 0.0f;
#pragma unroll
  for (int s = 0; s < kRegisterNormSlices; ++s) {
    const int c = (s * kRegisterNormThreads + threadIdx.x) * 4;
    v[s] = c < width ? load4(x, r * x.stride + c) : make_float4(0, 0, 0, 0);
    ss += v[s].x * v[s].x + v[s].y * v[s].y + v[s].z * v[s].z + v[s].w * v[s].w;
  }
  const float inv = rsqrtf(block_sum(ss) / width + eps);
#pragma unroll
  for (int s = 0; s < kRegisterNormSlices; ++s) {
    const int c = (s * kRegisterNormThreads + threadIdx.x) * 4;
    if (c >= width) break;
    const float4 g = load4(w, c);
    store4(out, r * out.stride + c,
           make_float4(v[s].x * inv * (g.x + offset), v[s].y * inv * (g.y + offset),
                       v[s].z * inv * (g.z + offset), v[s].w * inv * (g.w + offset)));
  }
}

// Block row = blockIdx.x (no 64-bit division per element); columns spread over blockIdx.y.
__global__ void gated_act_kernel(View gu, Act act, int64_t width, View out) {
  const int64_t r = blockIdx.x;
  for (int64_t c = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < width;
       c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const float g = load(gu, r * gu.stride + c), u = load(gu, r * gu.stride + width + c);
    store(out, r * out.stride + c, gated_fn(act, g, u));
  }
}

__global__ void act_kernel(View x, Act act, int64_t total, int64_t cols, View out) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t r = i / cols, c = i % cols;
    store(out, r * out.stride + c, act_fn(act, load(x, r * x.stride + c)));
  }
}

// One block per row; the row's cos/sin table in shared memory, reused by every head.
__global__ void rope_kernel(View x, int num_heads, int64_t head_stride, const int32_t* positions,
                            const float* inv_freq, int half, bool interleaved, float scale) {
  extern __shared__ float table[];  // cos [half] then sin [half]
  const int64_t r = blockIdx.x;
  const float pos = static_cast<float>(positions[r]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = pos * inv_freq[i];
    table[i] = cosf(angle) * scale;
    table[half + i] = sinf(angle) * scale;
  }
  __syncthreads();
  // Each thread rotates up to kPairs pairs, all loaded before any is stored: the loads are
  // independent, so they are in flight together (a row is a few KB: latency, not bandwidth).
  constexpr int kPairs = 4;
  const int total = num_heads * half;
  for (int first = threadIdx.x; first < total; first += kPairs * blockDim.x) {
    int64_t a[kPairs], b[kPairs];
    float x1[kPairs], x2[kPairs];
    int f[kPairs];
#pragma unroll
    for (int u = 0; u < kPairs; ++u) {
      const int idx = first + u * blockDim.x;
      f[u] = idx < total ? idx % half : -1;
      if (f[u] < 0) continue;
      const int64_t base = r * x.stride + (idx / half) * head_stride;
      a[u] = base + (interleaved ? 2 * f[u] : f[u]);
      b[u] = base + (interleaved ? 2 * f[u] + 1 : f[u] + half);
      x1[u] = load(x, a[u]);
      x2[u] = load(x, b[u]);
    }
#pragma unroll
    for (int u = 0; u < kPairs; ++u) {
      if (f[u] < 0) continue;
      const float c = table[f[u]], s = table[half + f[u]];
      store(x, a[u], x1[u] * c - x2[u] * s);
      store(x, b[u], x2[u] * c + x1[u] * s);
    }
  }
}

__global__ void gather_kernel(View src, int64_t src_rows, const int32_t* idx, int64_t total,
                              int64_t cols, View out) {
  STRATA_GRID_STRIDE(i, total) {
    const int64_t r = i / cols, c = i % cols, s = idx[r];
    store(out, r * out.stride + c, s >= 0 && s < src_rows ? load(src, s * src.stride + c) : 0.0f);
  }
}

__global__ void argmax_kernel(View logits, int64_t cols, int32_t* ids) {
  const int64_t base = blockIdx.x * logits.stride;
  float best = -FLT_MAX;
  int best_i = INT_MAX;  // loses every tie
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float v = load(logits, base + i);
    if (argmax_before(v, static_cast<int>(i), best, best_i)) best = v, best_i = static_cast<int>(i);
  }
  block_argmax(best, best_i);
  if (threadIdx.x == 0) ids[blockIdx.x] = best_i == INT_MAX ? 0 : best_i;
}

// One warp per token. Scores and choice values live in the warp's slice of shared memory;
// each lane owns experts lane, lane + 32, ... (bit j of `taken` is expert lane + 32 j).
__global__ void route_kernel(View logits, int64_t rows, const float* bias, RouteParams p,
                             int32_t* ids, float* weights) {
  extern __shared__ float smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int e = p.num_experts, k = p.top_k;
  float* scores = smem + warp * 2 * e;
  float* choice = scores + e;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(warps) + warp; t < rows;
       t += static_cast<int64_t>(gridDim.x) * warps) {
    const int64_t row = t * logits.stride;
    if (!p.sigmoid) {
      float m = -FLT_MAX;
      for (int i = lane; i < e; i += 32) m = fmaxf(m, load(logits, row + i));
      m = warp_max(m);
      float sum = 0.0f;
      for (int i = lane; i < e; i += 32) sum += scores[i] = expf(load(logits, row + i) - m);
      sum = warp_sum(sum);
      for (int i = lane; i < e; i += 32) scores[i] /= sum;
    } else {
      for (int i = lane; i < e; i += 32) scores[i] = 1.0f / (1.0f + expf(-load(logits, row + i)));
    }
    for (int i = lane; i < e; i += 32) choice[i] = scores[i] + (bias ? bias[i] : 0.0f);
    __syncwarp();

    if (p.num_groups > 1) {
      const int per = e / p.num_groups;
      float gs = -FLT_MAX;
      if (lane < p.num_groups) {
        const float* c = choice + lane * per;
        float v1 = -FLT_MAX, v2 = -FLT_MAX;  // the two highest, a repeated maximum counted twice
        for (int i = 0; i < per; ++i) {
          if (c[i] > v1)
            v2 = v1, v1 = c[i];
          else if (c[i] > v2)
            v2 = c[i];
        }
        gs = p.group_top_two ? v1 + v2 : v1;
      }
      unsigned kept = 0;
      for (int j = 0; j < p.topk_groups; ++j) {
        const bool open = lane < p.num_groups && !((kept >> lane) & 1u);
        float best = open ? gs : -FLT_MAX;
        int best_i = open ? lane : INT_MAX;
        warp_argmax(best, best_i);
        kept |= 1u << best_i;
      }
      // As transformers: the other groups' experts are masked to 0, not -inf.
      for (int i = lane; i < e; i += 32)
        if (!((kept >> (i / per)) & 1u)) choice[i] = 0.0f;
      __syncwarp();
    }

    unsigned taken = 0;
    for (int j = 0; j < k; ++j) {
      float best = -FLT_MAX;
      int best_i = INT_MAX;
      for (int b = 0, i = lane; i < e; ++b, i += 32)
        if (!((taken >> b) & 1u) && (choice[i] > best || best_i == INT_MAX))
          best = choice[i], best_i = i;
      warp_argmax(best, best_i);
      if (best_i % 32 == lane) taken |= 1u << (best_i / 32);
      if (lane == 0) {
        ids[t * k + j] = best_i;
        weights[t * k + j] = scores[best_i];
      }
    }
    if (lane == 0) {  // sequential, in the CPU's order, so that the sum rounds the same
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += weights[t * k + j];
      const float norm = p.normalize ? 1.0f / (sum + 1e-20f) : 1.0f;
      for (int j = 0; j < k; ++j) weights[t * k + j] *= norm * p.scaling;
    }
    __syncwarp();  // scores/choice are rewritten for the warp's next token
  }
}

int grid_for(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

int threads_for_row(int64_t width) {
  return width >= 1024 ? 1024 : static_cast<int>(((width + 31) / 32) * 32);
}

size_t elem_size(DType t) {
  return t == DType::BF16 ? 2 : 4;
}

// Whether rms_norm_register_kernel takes these rows: whole rows of at most 8192, every row
// start aligned for 4-element accesses.
bool rows_fit_register_norm(const View& x, const View& w, const View& out, int64_t groups,
                            int width) {
  auto aligned4 = [](const View& v) {
    return reinterpret_cast<uintptr_t>(v.data) % (4 * elem_size(v.dtype)) == 0;
  };
  return groups == 1 && width % 4 == 0 && width <= kRegisterNormThreads * kRegisterNormSlices * 4 &&
         aligned4(x) && x.stride % 4 == 0 && aligned4(out) && out.stride % 4 == 0 && aligned4(w);
}

}  // namespace

void copy_2d(View src, View dst, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  if (src.dtype == dst.dtype) {
    const size_t es = elem_size(src.dtype);
    STRATA_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, dst.stride * es, src.data, src.stride * es,
                                        cols * es, rows, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  copy_kernel<<<grid_for(total, 256), 256, 0, stream>>>(src, dst, total, cols);
  STRATA_CUDA_CHECK_LAUNCH();
}

void fill_2d(View t, int64_t rows, int64_t cols, float value, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  fill_kernel<<<grid_for(total, 256), 256, 0, stream>>>(t, total, cols, value);
  STRATA_CUDA_CHECK_LAUNCH();
}

void fill_dummy(void* t, DType dtype, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n == 0) return;
  fill_dummy_kernel<<<grid_for(n, 256), 256, 0, stream>>>(View{t, 0, dtype}, n, seed, stddev);
  STRATA_CUDA_CHECK_LAUNCH();
}

void add_2d(View x, View y, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  add_kernel<<<grid_for(total, 256), 256, 0, stream>>>(x, y, total, cols);
  STRATA_CUDA_CHECK_LAUNCH();
}

void mul_2d(View a, View b, bool per_row, bool sigmoid_b, View out, int64_t rows, int64_t cols,
            cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  mul_kernel<<<grid_for(total, 256), 256, 0, stream>>>(a, b, per_row, sigmoid_b, out, total, cols);
  STRATA_CUDA_CHECK_LAUNCH();
}

void scale_2d(View x, int64_t rows, int64_t cols, float s, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  scale_kernel<<<grid_for(total, 256), 256, 0, stream>>>(x, total, cols, s);
  STRATA_CUDA_CHECK_LAUNCH();
}

void add_bias_2d(View y, const void* bias, DType bias_dtype, int64_t rows, int64_t cols,
                 cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  const View b{const_cast<void*>(bias), 0, bias_dtype};
  add_bias_kernel<<<grid_for(total, 256), 256, 0, stream>>>(y, b, total, cols);
  STRATA_CUDA_CHECK_LAUNCH();
}

void rms_norm_2d(View x, const void* w, DType w_dtype, int64_t rows, int64_t groups, int width,
                 float eps, float offset, View out, cudaStream_t stream) {
  const int64_t items = rows * groups;
  if (items == 0) return;
  const View wv{const_cast<void*>(w), 0, w_dtype};
  if (width <= 512) {
    constexpr int kWarps = 8;
    rms_norm_warp_kernel<<<grid_for(items, kWarps), 32 * kWarps, 0, stream>>>(
        x, wv, items, groups, width, eps, offset, out);
  } else if (items > INT_MAX) {
    throw_error("rms_norm: too many rows for one launch");
  } else if (rows_fit_register_norm(x, wv, out, groups, width)) {
    rms_norm_register_kernel<<<static_cast<unsigned>(items), kRegisterNormThreads, 0, stream>>>(
        x, wv, width, eps, offset, out);
  } else {
    rms_norm_block_kernel<<<static_cast<unsigned>(items), threads_for_row(width), 0, stream>>>(
        x, wv, groups, width, eps, offset, out);
  }
  STRATA_CUDA_CHECK_LAUNCH();
}

void gated_act_2d(View gate_up, Act act, int64_t rows, int64_t width, View out,
                  cudaStream_t stream) {
  const int64_t total = rows * width;
  if (total == 0) return;
  if (rows > INT_MAX) throw_error("gated activation: too many rows for one launch");
  const unsigned col_blocks = static_cast<unsigned>(std::min<int64_t>((width + 255) / 256, 64));
  gated_act_kernel<<<dim3(static_cast<unsigned>(rows), col_blocks), 256, 0, stream>>>(gate_up, act,
                                                                                      width, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

void act_2d(View x, Act act, int64_t rows, int64_t cols, View out, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  act_kernel<<<grid_for(total, 256), 256, 0, stream>>>(x, act, total, cols, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

void rope_2d(View x, int64_t rows, int num_heads, int64_t head_stride, const int32_t* positions,
             const float* inv_freq, int rotary_dim, bool interleaved, float cos_sin_scale,
             cudaStream_t stream) {
  const int half = rotary_dim / 2;
  if (rows == 0 || half == 0 || num_heads == 0) return;
  if (rows > INT_MAX) throw_error("rope: too many rows for one launch");
  // Enough threads that a row's pairs take one round of kPairs loads each (up to 1024).
  const int threads = static_cast<int>(
      std::clamp<int64_t>((int64_t{num_heads} * half / 4 + 31) / 32 * 32, 32, 1024));
  rope_kernel<<<static_cast<unsigned>(rows), threads, 2 * half * sizeof(float), stream>>>(
      x, num_heads, head_stride, positions, inv_freq, half, interleaved, cos_sin_scale);
  STRATA_CUDA_CHECK_LAUNCH();
}

void gather_rows_2d(View src, int64_t src_rows, const int32_t* idx, int64_t rows, int64_t cols,
                    View out, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  gather_kernel<<<grid_for(total, 256), 256, 0, stream>>>(src, src_rows, idx, total, cols, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

void argmax_2d(View logits, int64_t rows, int64_t cols, int32_t* ids, cudaStream_t stream) {
  if (rows == 0) return;
  if (rows > INT_MAX || cols > INT_MAX) throw_error("argmax: logits too large for one launch");
  argmax_kernel<<<static_cast<unsigned>(rows), 1024, 0, stream>>>(logits, cols, ids);
  STRATA_CUDA_CHECK_LAUNCH();
}

void route(View logits, int64_t rows, const float* bias, const RouteParams& p, int32_t* ids,
           float* weights, cudaStream_t stream) {
  if (rows == 0) return;
  if (p.num_experts > kMaxRouteExperts || p.num_groups > 32)
    throw_error("route: at most 1024 experts in at most 32 groups on CUDA");
  constexpr int kWarps = 4;
  const size_t shared = size_t{kWarps} * 2 * p.num_experts * sizeof(float);
  route_kernel<<<grid_for(rows, kWarps), 32 * kWarps, shared, stream>>>(logits, rows, bias, p, ids,
                                                                        weights);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
