#pragma once
// AMX (Intel Sapphire Rapids and later): tile products for the prefill shapes of the CPU's
// int8 and bf16 weight products. Internal to kernels/cpu.
//
// int8 (cpu::linear_int8): one TDPBSUD multiplies 16 activation rows by a whole block of a weight
// group (64 columns of 16 rows), 16K multiply-adds where the VNNI kernel's vpdpbusd does 256. The
// packed weight block (int8_weights.h) is already the instruction's B tile: tile row i holds
// columns 4i..4i+3 of each of the 16 rows, stored + 128 (unsigned), and the quantized
// activations are its A tile (signed), so neither side is repacked. The int32 block products are
// exact, and they are scaled and summed in f32 with the VNNI kernel's own operations in the same
// order: the result equals that kernel's bit for bit (gemm_int8_test).
//
// bf16 (cpu::linear_bf16): one TDPBF16PS multiplies 16 input rows by 32 columns of 16 weight
// rows (8K multiply-adds; vdpbf16ps does 32). Each group of 16 weight rows is repacked once per
// call into the B tiles' pair layout (tile row i: columns 2i and 2i + 1 of each of the 16 rows)
// and then serves every input row. Each output is summed over k in the same order whatever the
// number of rows, so AMX rows do not depend on their batch; but that order is not the
// vdpbf16ps kernel's, so a row of an AMX prefill and the same row decoded (8 rows or fewer, by
// the vdpbf16ps kernel) agree to f32 rounding, not bit for bit.
#include <cstdint>

#include "kernels/cpu/int8_weights.h"

namespace strata::cpu::amx {

// Whether this CPU has AMX-INT8 / AMX-BF16 and Linux has granted this process the tile state
// (it hands the 8 KiB of tile registers only to a process that asks, once).
bool has_int8();
bool has_bf16();

// Input rows a group_product call takes at most (its f32 sums stay in L1: 8 KiB).
constexpr int64_t kRowBlock = 128;

// Loads the tile configuration group_product uses on the calling thread (tile state is per
// thread) and releases the tiles when it goes out of scope.
class Tiles {
 public:
  Tiles();
  ~Tiles();
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;
};

// out[r * 16 + lane] = the sums of one weight group (int8_weights.h) against the quantized rows
// r0..r0+rows-1 of x (rows <= kRowBlock); needs a Tiles on this thread. x must hold whole tiles
// of rows: QuantizedRows pads its values to a multiple of 16 rows.
void group_product(const int8::QuantizedRows& x, int64_t r0, int64_t rows, const uint8_t* group,
                   float* out);

// The B tiles of weight rows n0..n0+15 of w [n, k] (bf16 bits), for linear_bf16 and its test:
// for each block of 32 columns, 16 tile rows of 16 lanes, lane j of row i holding the pair
// (w[n0 + j][32 b + 2 i], w[n0 + j][32 b + 2 i + 1]) (the first in the low half, the order of
// memory). Zeros past n and past k; 256 lanes a block. Needs AVX-512.
void repack_group(const uint16_t* w, int64_t k, int64_t n, int64_t n0, uint32_t* b);

// y[m, n] += bf16(x[m, k]) . w[n, k]^T (w bf16 bits, sums f32), on the OpenMP threads (each
// takes groups of 16 weight rows and its own Tiles). x is rounded as bf16_dot::round_to_bf16
// rounds it, straight into the zero-padded A tiles. Requires has_bf16().
void linear_bf16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, float* y);

}  // namespace strata::cpu::amx
