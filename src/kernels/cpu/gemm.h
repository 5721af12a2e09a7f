#pragma once
#include <cstdint>

namespace strata::cpu {

// Every CPU kernel runs on one thread pool, OpenMP's. OpenBLAS computes single-threaded, once per
// OpenMP thread on that thread's block of output columns: with OpenBLAS's own threads beside
// OpenMP's, each pool's idle threads spin while the other's work, which made batch-16 decode on
// two cores 2-3x slower than one core (docs/benchmarks.md, tensor parallelism on CPU).

// y[m, n] = x[m, k] . w[n, k]^T (+ bias[n]): the layout of a PyTorch nn.Linear weight.
void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y);

// The same with bf16 weights (`w` holds bf16 bit patterns): the inputs are rounded to bf16 (as
// the GPU's bf16 GEMMs and llama.cpp's bf16 take them), the sums are f32, and so is y. With
// AVX512_BF16 one kernel takes every shape; elsewhere decode
// shapes (up to 8 rows) stream the weight once for all rows with AVX-512 or AVX2 FMAs (a
// portable loop without either) and larger ones widen panels of weight rows to f32 for
// OpenBLAS.
// `simd` caps the instruction set the kernels use (tests run every level; one this CPU lacks
// falls back to the next below it). Amx is for prefill shapes (AMX-INT8 tiles for int8 weights,
// AMX-BF16 for bf16) and Avx512Bf16 for bf16 weights (vdpbf16ps, no tiles); as a cap for anything
// else each means Avx512.
enum class Simd { Best, Amx, Avx512Bf16, Avx512, Avx2, Portable };
void linear_bf16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                 const float* bias, float* y, Simd simd = Simd::Best);

// The same with int8 weights (DType::Q8, packed as kernels/cpu/int8_weights.h describes):
// rows [row0, row0 + n) of the packed matrix of k columns in `w`. x is quantized to int8 per
// row and block of 64 on the fly; the products are int32 per block, scaled and summed in f32
// (AMX-INT8 for more than 8 rows, AVX-512 VNNI, AVX2 or portable kernels, all computing the
// same integers).
void linear_int8(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t row0, int64_t n,
                 const float* bias, float* y, Simd simd = Simd::Best);

// y[m, n] = x[m, k] . w[k, n]
void matmul(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y);

// y[m, n] = x[m, k] . W + beta * y, W = w[n, ldw]^T (`transposed_w`: rows of a Linear weight) or
// w[k, ldw] (columns [0, n)): OpenBLAS's sgemm on blocks of columns, one block per OpenMP thread
// (one block inside a parallel region, or when the product is too small to split).
constexpr int64_t kSgemmBlockColumns = 64;
int sgemm_parts(int64_t m, int64_t n, int64_t k);
void sgemm_columns(bool transposed_w, int64_t m, int64_t n, int64_t k, const float* x,
                   const float* w, int64_t ldw, float beta, float* y);

void set_num_threads(int n);

}  // namespace strata::cpu
