#pragma once
// AMX-INT8 (Intel Sapphire Rapids and later) for the prefill shapes of cpu::linear_int8: one
// TDPBSUD multiplies 16 activation rows by a whole block of a weight group (64 columns of 16
// rows), 16K multiply-adds where the VNNI kernel's vpdpbusd does 256. The packed weight block
// (int8_weights.h) is already the instruction's B tile: tile row i holds columns 4i..4i+3 of
// each of the 16 rows, stored + 128 (unsigned), and the quantized activations are its A tile
// (signed), so neither side is repacked. The int32 block products are exact, and they are
// scaled and summed in f32 with the VNNI kernel's own operations in the same order: the result
// equals that kernel's bit for bit (gemm_int8_test). Internal to kernels/cpu.
#include <cstdint>

#include "kernels/cpu/int8_weights.h"

namespace strata::cpu::amx {

// Whether this CPU has AMX-INT8 and Linux has granted this process the tile state (it hands
// the 8 KiB of tile registers only to a process that asks, once).
bool has_int8();

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

}  // namespace strata::cpu::amx
