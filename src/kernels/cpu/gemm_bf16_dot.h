#pragma once
// bf16 weight products on CPUs with AVX512_BF16 (Zen 4 and later, Cooper Lake, Sapphire
// Rapids): `vdpbf16ps` multiplies 32 pairs of bf16 and adds each adjacent pair of products into
// one of 16 f32 lanes, so the weights are never widened. The f32 inputs are rounded to bf16 once
// per call (linear_bf16's contract: bf16 inputs and weights, f32 sums), so one vdpbf16ps covers
// 32 weights: a quarter of the instructions of widening and FMAs, and prefill needs no widened
// panels for sgemm. Internal to kernels/cpu (gemm_bf16.cpp chooses it).
#include <cstdint>

namespace strata::cpu::bf16_dot {

// Whether this CPU has AVX512_BF16 (with AVX-512 F and BW, which the kernels also use).
bool available();

// out[i] = f32_to_bf16(x[i]): the same bits from the vector form (where the CPU has AVX-512) and
// the scalar one (vcvtneps2bf16 is not used: it flushes denormals).
void round_to_bf16(const float* x, int64_t count, uint16_t* out);

// y[m, n] += bf16(x[m, k]) . w[n, k]^T (w bf16 bits, sums in f32). Every output is summed in the
// same order whatever m is: one accumulator per output over 32-column steps, the last step masked,
// then one horizontal sum, so a row's result does not depend on the rows beside it (decode,
// prefill and chunked prefill agree bit for bit). Requires available().
void linear(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y);

}  // namespace strata::cpu::bf16_dot
