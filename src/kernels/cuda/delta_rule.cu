#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/delta_rule.h"
#include "kernels/cuda/recurrent_common.cuh"
#include "kernels/cuda/reduce.cuh"

namespace strata::cuda {

namespace {

constexpr int kThreads = 128;

// Block (value head h, request): thread j owns columns j, j + blockDim, ... of the state, so the
// per-token update needs no synchronization beyond loading the token's normalized q and k.
template <typename S>
__global__ void delta_rule_kernel(const float* qkv, int64_t qkv_stride, const float* b,
                                  int64_t b_stride, const float* a, int64_t a_stride,
                                  const float* A, const float* dt_bias, DeltaRuleShape sh,
                                  const int32_t* seqs, S* states, float* y) {
  extern __shared__ float smem[];
  const int h = blockIdx.x;
  const Seq q = seq_at(seqs, blockIdx.y);
  if (q.len == 0) return;
  const int DK = sh.k_dim, DV = sh.v_dim, HV = sh.num_v_heads;
  const int kh = h / (HV / sh.num_k_heads);
  const int64_t qk = static_cast<int64_t>(sh.num_k_heads) * DK;
  float* state = smem;          // [DK, DV]
  float* qs = state + DK * DV;  // [DK]
  float* ks = qs + DK;          // [DK]
  const int64_t head_numel = static_cast<int64_t>(DK) * DV;
  S* stored = states + static_cast<int64_t>(q.slot) * HV * head_numel + h * head_numel;
  for (int64_t i = threadIdx.x; i < head_numel; i += blockDim.x)
    state[i] = q.resumes ? load_state(stored, i) : 0.0f;
  const float scale = rsqrtf(static_cast<float>(DK));
  for (int t = 0; t < q.len; ++t) {
    const int64_t row = q.begin + t;
    const float* qrow = qkv + row * qkv_stride + kh * DK;
    const float* krow = qrow + qk;
    const float* vrow = qkv + row * qkv_stride + 2 * qk + static_cast<int64_t>(h) * DV;
    float qq = 0.0f, kk = 0.0f;
    for (int i = threadIdx.x; i < DK; i += blockDim.x)
      qq += qrow[i] * qrow[i], kk += krow[i] * krow[i];
    qq = block_sum(qq);
    kk = block_sum(kk);
    const float qn = scale * rsqrtf(qq + 1e-6f), kn = rsqrtf(kk + 1e-6f);
    for (int i = threadIdx.x; i < DK; i += blockDim.x) qs[i] = qrow[i] * qn, ks[i] = krow[i] * kn;
    __syncthreads();
    const float beta = 1.0f / (1.0f + expf(-b[row * b_stride + h]));
    const float decay = expf(A[h] * softplus(a[row * a_stride + h] + dt_bias[h]));
    for (int j = threadIdx.x; j < DV; j += blockDim.x) {
      float mem = 0.0f;
      for (int i = 0; i < DK; ++i) {
        const float s = state[i * DV + j] * decay;
        state[i * DV + j] = s;
        mem += s * ks[i];
      }
      const float delta = (vrow[j] - mem) * beta;
      float out = 0.0f;
      for (int i = 0; i < DK; ++i) {
        const float s = state[i * DV + j] + ks[i] * delta;
        state[i * DV + j] = s;
        out += s * qs[i];
      }
      y[row * HV * DV + static_cast<int64_t>(h) * DV + j] = out;
    }
    __syncthreads();  // qs and ks are rewritten for the next token
  }
  for (int64_t i = threadIdx.x; i < head_numel; i += blockDim.x) store_state(stored, i, state[i]);
}

template <typename S>
void launch(const float* qkv, int64_t qkv_stride, const float* b, int64_t b_stride, const float* a,
            int64_t a_stride, const float* A, const float* dt_bias, const DeltaRuleShape& sh,
            const int32_t* seqs, int batch, S* states, float* y, cudaStream_t stream) {
  const size_t smem = (static_cast<size_t>(sh.k_dim) * sh.v_dim + 2 * sh.k_dim) * sizeof(float);
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(
      delta_rule_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(sh.num_v_heads), static_cast<unsigned>(batch));
  delta_rule_kernel<S><<<grid, kThreads, smem, stream>>>(qkv, qkv_stride, b, b_stride, a, a_stride,
                                                         A, dt_bias, sh, seqs, states, y);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* b, int64_t b_stride,
                      const float* a, int64_t a_stride, const float* A, const float* dt_bias,
                      const DeltaRuleShape& shape, const int32_t* seqs, int batch, void* states,
                      DType state_dtype, float* y, cudaStream_t stream) {
  if (batch == 0) return;
  // The state of one head in shared memory: 128 x 128 (Qwen3-Next) is 64 KiB of the H200's 227.
  const size_t smem = (static_cast<size_t>(shape.k_dim) * shape.v_dim + 2 * shape.k_dim) * 4;
  if (smem > 200 * 1024)
    throw_error("gated delta rule on CUDA: a head state of " + std::to_string(shape.k_dim) + " x " +
                std::to_string(shape.v_dim) + " is over the kernel's shared-memory limit");
  if (state_dtype == DType::BF16)
    launch(qkv, qkv_stride, b, b_stride, a, a_stride, A, dt_bias, shape, seqs, batch,
           static_cast<bf16*>(states), y, stream);
  else
    launch(qkv, qkv_stride, b, b_stride, a, a_stride, A, dt_bias, shape, seqs, batch,
           static_cast<float*>(states), y, stream);
}

}  // namespace strata::cuda
