#pragma once
// bf16 weight products on CPUs with AVX512_BF16 (Zen 4 and later, Cooper Lake, Sapphire
// Rapids): `vdpbf16ps` multiplies 32 pairs of bf16 and adds each adjacent pair of products into
// one of 16 f32 lanes, so the weights are never widened. The f32 inputs enter as two bf16 parts,
// hi = bf16(x) and lo = bf16(x - hi), 16 significant bits together (within 2^-17 of x), so the
// result is linear_bf16's contract, the f32 product with the rounded weights, to about 1e-5
// relative, at two vdpbf16ps per 32 weights: half the instructions of widening and FMAs for
// decode, and prefill no longer widens panels for sgemm. Internal to kernels/cpu (gemm_bf16.cpp
// chooses it).
#include <cstdint>

namespace strata::cpu::bf16_dot {

// Whether this CPU has AVX512_BF16 (with AVX-512 F and BW, which the kernels also use).
bool available();

// hi[i] = f32_to_bf16(x[i]); lo[i] = f32_to_bf16(x[i] - hi[i]), 0 where hi is not finite: the
// same bits from the vector form (where the CPU has AVX512_BF16) and the scalar one.
void split_to_bf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo);

// y[m, n] += x[m, k] . w[n, k]^T (w bf16 bits, sums in f32). Every output is summed in the same
// order whatever m is: one accumulator per output over 32-column steps, the last step masked,
// then one horizontal sum, so a row's result does not depend on the rows beside it (decode,
// prefill and chunked prefill agree bit for bit). Requires available().
void linear(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y);

}  // namespace strata::cpu::bf16_dot
