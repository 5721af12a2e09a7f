#pragma once
#include <cstdint>

namespace strata::cpu {

// y[m, n] = x[m, k] . w[n, k]^T (+ bias[n]): the layout of a PyTorch nn.Linear weight.
// OpenBLAS does the work on all cores.
void linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y);

// The same with bf16 weights (`w` holds bf16 bit patterns), f32 inputs and sums: each weight is
// widened to f32 exactly as it is read, so the result is the f32 product with the rounded
// weights. Decode shapes (up to 8 rows) stream the weight once for all rows with AVX-512 or
// AVX2 where the CPU has them (a portable loop elsewhere); larger ones widen panels of weight
// rows to f32 and hand them to OpenBLAS.
// `simd` caps the instruction set the decode kernel uses (tests run every level the CPU has).
enum class Simd { Best, Avx512, Avx2, Portable };
void linear_bf16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                 const float* bias, float* y, Simd simd = Simd::Best);

// The same with int8 weights (DType::Q8, packed as kernels/cpu/int8_weights.h describes):
// rows [row0, row0 + n) of the packed matrix of k columns in `w`. x is quantized to int8 per
// row and block of 64 on the fly; the products are int32 per block, scaled and summed in f32
// (AVX-512 VNNI, AVX2 or portable kernels, all computing the same integers).
void linear_int8(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t row0, int64_t n,
                 const float* bias, float* y, Simd simd = Simd::Best);

// y[m, n] = x[m, k] . w[k, n]
void matmul(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y);

void set_num_threads(int n);

}  // namespace strata::cpu
