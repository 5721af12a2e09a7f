#pragma once
// The CUDA kernels behind CudaOps (ops/cuda/cuda_ops.h): every op of the ops interface on
// rows x cols views with a row stride, in the dtypes model code hands them (f32 or bf16 for
// floating tensors, int32 for ids and positions). Every pointer is device memory, every launch
// goes on `stream` and is checked, no kernel reads anything back to the host (the ops are
// captured into CUDA graphs). Arithmetic is f32 whatever the storage dtype.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace strata::cuda {

// A rows x cols view: element (r, c) at data + r * stride + c, of `dtype`.
struct View {
  void* data = nullptr;
  int64_t stride = 0;
  DType dtype = DType::F32;
};

// The activations of ops.h (Activation), as kernels number them.
enum class Act { Silu = 0, Gelu = 1, GeluTanh = 2, Relu2 = 3, ClampedSwiglu = 4 };

// dst = src, converting between f32 and bf16 (same-dtype copies take cudaMemcpy2DAsync).
void copy_2d(View src, View dst, int64_t rows, int64_t cols, cudaStream_t stream);
void fill_2d(View t, int64_t rows, int64_t cols, float value, cudaStream_t stream);
// t[i] = dummy_value(seed, i, stddev) (core/dummy_random.h) rounded to t's dtype; contiguous.
void fill_dummy(void* t, DType dtype, int64_t n, uint64_t seed, float stddev, cudaStream_t stream);
void add_2d(View x, View y, int64_t rows, int64_t cols, cudaStream_t stream);  // x += y
// out = a * g(b), g = sigmoid with `sigmoid_b`; b one column (`per_row`) or a's shape. out may be
// a.
void mul_2d(View a, View b, bool per_row, bool sigmoid_b, View out, int64_t rows, int64_t cols,
            cudaStream_t stream);
void scale_2d(View x, int64_t rows, int64_t cols, float s, cudaStream_t stream);
// y[r, :] += bias (bias f32 or bf16, `cols` long).
void add_bias_2d(View y, const void* bias, DType bias_dtype, int64_t rows, int64_t cols,
                 cudaStream_t stream);

// out = x / rms(x) * (w + offset) over each group of `width` columns (cols = groups * width);
// out may be x (every element is read before it is written, by the same thread).
void rms_norm_2d(View x, const void* w, DType w_dtype, int64_t rows, int64_t groups, int width,
                 float eps, float offset, View out, cudaStream_t stream);

// gate_up [rows, 2 * width] -> out [rows, width] = act(gate) * up.
void gated_act_2d(View gate_up, Act act, int64_t rows, int64_t width, View out,
                  cudaStream_t stream);
void act_2d(View x, Act act, int64_t rows, int64_t cols, View out, cudaStream_t stream);

// Rotates `num_heads` heads of every row in place (head h at column h * head_stride):
// the first `rotary_dim` elements of each head, NeoX halves or interleaved pairs.
void rope_2d(View x, int64_t rows, int num_heads, int64_t head_stride, const int32_t* positions,
             const float* inv_freq, int rotary_dim, bool interleaved, float cos_sin_scale,
             cudaStream_t stream);

// out[r] = src[idx[r]] for r < rows; rows of `cols`; an index outside [0, src_rows) gives a
// zero row (a kernel cannot report it, and a garbage read is worse).
void gather_rows_2d(View src, int64_t src_rows, const int32_t* idx, int64_t rows, int64_t cols,
                    View out, cudaStream_t stream);

// ids[r] = the first maximum of row r.
void argmax_2d(View logits, int64_t rows, int64_t cols, int32_t* ids, cudaStream_t stream);

// MoE routing, one warp per token; mirrors cpu::route_tokens (kernels/cpu/routing_rope.cpp)
// decision for decision. `bias` (f32, num_experts) only with correction_bias.
struct RouteParams {
  int num_experts = 0, top_k = 0;
  bool sigmoid = false;
  int num_groups = 1, topk_groups = 1;
  bool group_top_two = false;  // GroupScore::TopTwoSum; Max otherwise
  bool normalize = false;
  float scaling = 1.0f;
};
constexpr int kMaxRouteExperts = 1024;  // 32 per lane: each lane's taken-mask is one word
void route(View logits, int64_t rows, const float* bias, const RouteParams& p, int32_t* ids,
           float* weights, cudaStream_t stream);

}  // namespace strata::cuda
