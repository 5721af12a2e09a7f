// Logit edits (one thread per edit) and log-probabilities (one block per row: a max and a
// sum of exponentials for the log-partition, then top_n block-wide argmax rounds, each
// excluding what the rounds before took; top_n is at most 20, and the row stays in L2).
#include <cfloat>
#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/logit_ops.h"
#include "kernels/cuda/reduce.cuh"
#include "ops/logit_edits.h"
#include "ops/logprobs.h"
#include "ops/token_masks.h"

namespace strata::cuda {

namespace {

__global__ void edit_logits_kernel(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                                   const int32_t* edits, int64_t capacity) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= capacity) return;
  const LogitEdit e = LogitEdit::unpack(edits + i * kLogitEditInts);
  if (e.row < 0 || e.row >= rows || e.token < 0 || e.token >= vocab) return;
  float& x = logits[e.row * stride + e.token];
  x = e.apply(x);
}

// Grid (vocab chunks, masks): one thread per logit of a masked row.
__global__ void mask_logits_kernel(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                                   const int32_t* mask_rows, const int32_t* masks) {
  const int32_t r = mask_rows[blockIdx.y];
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r < 0 || r >= rows || t >= vocab) return;
  const uint32_t* m =
      reinterpret_cast<const uint32_t*>(masks) + blockIdx.y * 2 * token_mask_words(vocab);
  if (!((m[t / 32] >> (t % 32)) & 1u)) logits[r * stride + t] = -INFINITY;
}

constexpr int kLogprobThreads = 512;

__global__ __launch_bounds__(kLogprobThreads) void logprobs_kernel(const float* logits,
                                                                   int64_t stride, int vocab,
                                                                   const int32_t* ids, int top_n,
                                                                   float* out) {
  const float* x = logits + blockIdx.x * stride;
  float* o = out + static_cast<int64_t>(blockIdx.x) * logprob_row_width(top_n);
  float m = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) m = fmaxf(m, x[i]);
  m = block_max(m);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) sum += __expf(x[i] - m);
  const float log_z = m + logf(block_sum(sum));
  if (threadIdx.x == 0) {
    const int token = ids[blockIdx.x];
    o[0] = token >= 0 && token < vocab ? x[token] - log_z : -INFINITY;
  }
  // Round j takes the first (value, index) after round j - 1's in the argmax order.
  float prev = INFINITY;
  int prev_i = -1;
  for (int j = 0; j < top_n; ++j) {
    float best = -FLT_MAX;
    int best_i = INT_MAX;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float v = x[i];
      const bool after = v < prev || (v == prev && i > prev_i);
      if (after && argmax_before(v, i, best, best_i)) best = v, best_i = i;
    }
    block_argmax(best, best_i);
    if (best_i == INT_MAX) best_i = 0, best = x[0];  // fewer tokens than top_n: not reached
    if (threadIdx.x == 0) {
      o[kLogprobHead + 2 * j] = static_cast<float>(best_i);
      o[kLogprobHead + 2 * j + 1] = best - log_z;
    }
    prev = best, prev_i = best_i;
  }
}

}  // namespace

void edit_logits(float* logits, int64_t stride, int64_t rows, int64_t vocab, const int32_t* edits,
                 int64_t capacity, cudaStream_t stream) {
  if (capacity == 0 || rows == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (capacity + kThreads - 1) / kThreads;
  edit_logits_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      logits, stride, rows, vocab, edits, capacity);
  STRATA_CUDA_CHECK_LAUNCH();
}

void mask_logits(float* logits, int64_t stride, int64_t rows, int64_t vocab,
                 const int32_t* mask_rows, const int32_t* masks, int64_t n, cudaStream_t stream) {
  if (n == 0 || rows == 0 || vocab == 0) return;
  if (n > 65535) throw_error("mask_logits: more than 65535 masked rows in one launch");
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((vocab + kThreads - 1) / kThreads),
                  static_cast<unsigned>(n));
  mask_logits_kernel<<<grid, kThreads, 0, stream>>>(logits, stride, rows, vocab, mask_rows, masks);
  STRATA_CUDA_CHECK_LAUNCH();
}

void logprobs(const float* logits, int64_t stride, int64_t rows, int64_t vocab, const int32_t* ids,
              int top_n, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  if (rows > INT_MAX || vocab > INT_MAX) throw_error("logprobs: logits too large for one launch");
  logprobs_kernel<<<static_cast<unsigned>(rows), kLogprobThreads, 0, stream>>>(
      logits, stride, static_cast<int>(vocab), ids, top_n, out);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::cuda
