// Token sampling on the GPU: one block per row of logits, the rule of ops/sampling.h. The
// thresholds are exact order statistics found by radix selection over the logits' bit
// patterns (four passes of 8-bit digits, most significant first), so top-k and top-p cost a
// few reads of the row instead of a sort; the draw is the inverse CDF in vocabulary order,
// a block-wide scan of per-thread chunk masses.
#include <cfloat>
#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/sampling.h"
#include "ops/sampling.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 1024;
using Reduce = cub::BlockReduce<float, kThreads>;
using Scan = cub::BlockScan<float, kThreads>;

// Unsigned keys in the floats' order (negative floats have their bits flipped).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct SampleShared {
  union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  };
  float hist_mass[256];
  int hist_count[256];
  uint32_t digit;
  float remaining, mass;
  int chosen, last_kept;
};

// The first maximum of the row (block-wide); every thread gets it.
__device__ void row_argmax(const float* x, int vocab, float& best, int& best_i) {
  best = -FLT_MAX;
  best_i = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (argmax_before(x[i], i, best, best_i)) best = x[i], best_i = i;
  block_argmax(best, best_i);
  if (best_i == INT_MAX) best_i = 0;
}

// The largest key K (among keys >= lower) whose upper tail {key >= K, key >= lower} reaches
// `target`: counted in tokens (by_mass false) or in weight exp((x - m) / T) (by_mass true).
__device__ uint32_t radix_select(const float* x, int vocab, uint32_t lower, bool by_mass,
                                 float target, float m, float inv_t, SampleShared& sh) {
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) sh.remaining = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist_mass[b] = 0.0f, sh.hist_count[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const uint32_t key = order_key(x[i]);
      if (key < lower || (key & mask) != prefix) continue;
      const int bin = (key >> shift) & 255;
      if (by_mass)
        atomicAdd(&sh.hist_mass[bin], __expf((x[i] - m) * inv_t));
      else
        atomicAdd(&sh.hist_count[bin], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // From the largest digit down: the bin where the tail reaches what is still needed.
      float above = 0.0f;
      int pick = -1, lowest = 0;
      for (int b = 255; b >= 0; --b) {
        const float here = by_mass ? sh.hist_mass[b] : static_cast<float>(sh.hist_count[b]);
        if (here <= 0.0f) continue;
        lowest = b;
        if (above + here >= sh.remaining) {
          pick = b;
          break;
        }
        above += here;
      }
      // Rounding can leave the target above the whole mass: then everything stays.
      if (pick < 0) pick = lowest;
      sh.remaining -= above;
      sh.digit = static_cast<uint32_t>(pick);
    }
    __syncthreads();
    prefix |= sh.digit << shift;
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

__global__ __launch_bounds__(kThreads) void sample_kernel(const float* logits, int64_t stride,
                                                          int vocab, const int32_t* rows,
                                                          int32_t* ids) {
  __shared__ SampleShared sh;
  const float* x = logits + blockIdx.x * stride;
  const SamplingRow row =
      SamplingRow::unpack(rows + static_cast<int64_t>(blockIdx.x) * kSamplingRowInts);

  float m;
  int first_max;
  row_argmax(x, vocab, m, first_max);
  if (row.temperature == 0.0f || row.top_k == 1) {
    if (threadIdx.x == 0) ids[blockIdx.x] = first_max;
    return;
  }
  const float inv_t = 1.0f / row.temperature;
  auto weight = [&](int i) { return __expf((x[i] - m) * inv_t); };

  uint32_t threshold = 0;  // keys below are dropped
  if (row.top_k > 0 && row.top_k < vocab)
    threshold = radix_select(x, vocab, 0, false, static_cast<float>(row.top_k), m, inv_t, sh);
  if (row.top_p < 1.0f) {
    float mass = 0.0f;
    for (int i = threadIdx.x; i < vocab; i += kThreads)
      if (order_key(x[i]) >= threshold) mass += weight(i);
    mass = Reduce(sh.reduce).Sum(mass);
    if (threadIdx.x == 0) sh.mass = mass;
    __syncthreads();
    threshold = radix_select(x, vocab, threshold, true, row.top_p * sh.mass, m, inv_t, sh);
  }

  // The draw: the first token (in vocabulary order) where the kept mass passes u * total.
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * chunk);
  const int end = min(vocab, begin + chunk);
  float local = 0.0f;
  int last_kept = -1;
  for (int i = begin; i < end; ++i) {
    const float w = weight(i);
    if (order_key(x[i]) >= threshold && w >= row.min_p) local += w, last_kept = i;
  }
  float before = 0.0f, total = 0.0f;
  Scan(sh.scan).ExclusiveSum(local, before, total);
  if (threadIdx.x == 0) sh.chosen = INT_MAX, sh.last_kept = -1;
  __syncthreads();
  if (last_kept >= 0) atomicMax(&sh.last_kept, last_kept);
  const float target = counter_uniform(row.seed(), row.step) * total;
  if (local > 0.0f && before <= target && target < before + local) {
    float running = before;
    for (int i = begin; i < end; ++i) {
      const float w = weight(i);
      if (order_key(x[i]) < threshold || w < row.min_p) continue;
      running += w;
      if (running > target || i == last_kept) {
        atomicMin(&sh.chosen, i);
        break;
      }
    }
  }
  __syncthreads();
  // Rounding can put the target at the very end of the mass: then the last kept token.
  if (threadIdx.x == 0)
    ids[blockIdx.x] = sh.chosen != INT_MAX ? sh.chosen
                      : sh.last_kept >= 0  ? sh.last_kept
                                           : first_max;
}

}  // namespace

void sample_rows(const float* logits, int64_t stride, int64_t rows, int64_t vocab,
                 const int32_t* sampling_rows, int32_t* ids, cudaStream_t stream) {
  if (rows == 0) return;
  if (rows > INT_MAX || vocab > INT_MAX) throw_error("sample: logits too large for one launch");
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, stride, static_cast<int>(vocab), sampling_rows, ids);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
