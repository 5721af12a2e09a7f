#pragma once
// Element-wise and row-wise CUDA kernels of the dense decoder. Every pointer is device
// memory; every launch goes on `stream` and is checked. The residual stream and every
// reduction are f32; matrices and the KV cache are bf16 (GEMM inputs are rounded once).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

using bf16 = __nv_bfloat16;

// out[t] = table[ids[t]] (bf16 -> f32), rows of `width`.
void embedding(const bf16* table, const int32_t* ids, int num_tokens, int width, float* out,
               cudaStream_t stream);

// out[r] = x[src(r)] / rms(x[src(r)]) * (w + weight_offset), src(r) = rows ? rows[r] : r.
// `rows` picks the rows to normalize (each request's last token before the LM head).
void rms_norm(const float* x, const int32_t* rows, const float* w, int num_rows, int width,
              float eps, float weight_offset, bf16* out, cudaStream_t stream);
void rms_norm(const float* x, const int32_t* rows, const float* w, int num_rows, int width,
              float eps, float weight_offset, float* out, cudaStream_t stream);

// Per-head RMSNorm (optional: null weights skip it) then rotary embedding, in place on the
// q and k heads of each row of qkv [T, row_stride]: q heads start at column 0, k heads at
// k_offset. `inv_freq` [rotary_dim / 2] comes from RotaryEmbedding (every rope variant the
// CPU supports), `cos_sin_scale` is its YaRN factor. NeoX halves unless `interleaved`.
struct RopeParams {
  int num_q_heads = 0, num_k_heads = 0, head_dim = 0;
  int64_t row_stride = 0, k_offset = 0;
  const float* q_norm = nullptr;  // [head_dim] or null
  const float* k_norm = nullptr;
  float norm_eps = 1e-6f;
  const float* inv_freq = nullptr;  // null: no rotary embedding
  int rotary_dim = 0;
  float cos_sin_scale = 1.0f;
  bool interleaved = false;
};
void qk_norm_rope(float* qkv, const int32_t* positions, int num_tokens, const RopeParams& p,
                  cudaStream_t stream);

// gate_up [rows, 2 * width] = [gate | up] -> out = act(gate) * up (silu, or gelu-tanh).
void gated_act(const float* gate_up, int rows, int width, bool gelu, bf16* out,
               cudaStream_t stream);

// y[r, :] += bias
void add_bias(float* y, const float* bias, int rows, int width, cudaStream_t stream);

// Rows of `src` [rows, src_stride] columns [col, col + width) -> bf16 out [rows, width].
void to_bf16(const float* src, int rows, int64_t src_stride, int width, bf16* out,
             cudaStream_t stream);

// Writes the new tokens' keys and values into the cache rows `slots` (bf16). k and v are
// [T, *] with row strides; v may be null when the layout keeps values inside keys.
void store_kv(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              const int32_t* slots, int num_tokens, int k_width, int v_width, bf16* k_cache,
              int64_t k_cache_stride, bf16* v_cache, int64_t v_cache_stride, cudaStream_t stream);

// req_to_token[req_pool_indices[b] * stride + prefix_lens[b] + i] = out_cache_loc[offsets[b] + i]
// for every new token: the device mirror of ReqToTokenPool follows the batch's new tokens.
void scatter_req_to_token(const int32_t* req_pool_indices, const int32_t* prefix_lens,
                          const int32_t* token_offsets, const int32_t* out_cache_loc, int batch,
                          int max_extend, int32_t* req_to_token, int stride, cudaStream_t stream);

// ids[r] = argmax logits[r, :vocab] (first maximum, as the CPU sampler).
void argmax_rows(const float* logits, int rows, int vocab, int32_t* ids, cudaStream_t stream);

// A kernel that fails (illegal instruction), for fault-injection tests: the device context is
// unusable afterwards, as after a real kernel fault.
void trap(cudaStream_t stream);

// Random bf16 values, uniform with standard deviation `stddev`, deterministic in (seed, index):
// dummy weights made on the device (an 8B model in a second instead of minutes on the host).
void fill_random(bf16* out, int64_t n, uint64_t seed, float stddev, cudaStream_t stream);

}  // namespace strata::cuda
