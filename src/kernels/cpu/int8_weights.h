#pragma once
// Int8 weight matrices (DType::Q8, --quantization int8) and the activations they multiply.
// Internal to kernels/cpu and CpuOps.
//
// Weights: w[n, k] becomes int8 with one f32 scale per row and block of kBlockCols = 64
// columns: scale = max |w| / 127 over the block, values round(w / scale) in [-127, 127].
// (llama.cpp's Q8_0 takes blocks of 32 with an f16 scale: the same 8.5 bits per weight. A block
// of 64 is one 64-byte vector, so each block is one load and one dot-product instruction per
// tile row, and its f32 scale needs no conversion.)
//
// Layout: rows in groups of kGroupRows = 16 (one per 32-bit lane of a 512-bit vector), a group
// a run of its blocks, a block kGroupRows tile rows of 64 bytes followed by the 16 rows' f32
// scales (1088 bytes). Tile row i holds, for each of the 16 weight rows in turn, its columns
// 4i..4i+3: vpdpbusd then multiplies one tile row by 4 activation bytes broadcast to every lane
// and adds a 4-term dot product into each row's lane (AMX-INT8 reads the same layout as its B
// tile). Values are stored as w + 128: vpdpbusd's first operand is unsigned, so the activations
// (signed) go second and the kernel subtracts 128 * sum(activations) per block. Padding rows and
// columns are 0 (stored 128, scale 0).
//
// Activations: quantized on the fly per row and block of 64 columns, the same rule (scale
// max |x| / 127, values in [-127, 127]), so a block's dot product is exact in int32 and only
// the two scales multiply it in f32.
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace strata::cpu::int8 {

constexpr int64_t kGroupRows = kQ8GroupRows;
constexpr int64_t kBlockCols = kQ8BlockCols;
constexpr int64_t kTileRowBytes = 4 * kGroupRows;  // 4 columns of each row of the group
constexpr int64_t kTileBytes = kGroupRows * kBlockCols;
constexpr int64_t kBlockBytes = kTileBytes + kGroupRows * int64_t{sizeof(float)};

inline int64_t blocks(int64_t k) {
  return (k + kBlockCols - 1) / kBlockCols;
}
inline int64_t groups(int64_t n) {
  return (n + kGroupRows - 1) / kGroupRows;
}
inline int64_t group_bytes(int64_t k) {
  return blocks(k) * kBlockBytes;
}

// Quantizes `count` (<= kGroupRows) rows of k f32 values, `rows` row-major, into one packed
// group; the group's other rows are padding.
void quantize_group(const float* rows, int64_t count, int64_t k, uint8_t* group);

// Row `r` of a packed [n, k] matrix as f32 (the values the kernels multiply by).
void dequantize_row(const uint8_t* packed, int64_t k, int64_t r, float* out);

// Activations x[m, k] quantized per row and block (layout above); k padded to whole blocks
// with zeros.
struct QuantizedRows {
  int64_t rows = 0, blocks = 0;
  std::vector<int8_t> values;  // [rows, blocks * kBlockCols], rows padded to a multiple of 16
  std::vector<float> scales;   // [rows, blocks]
  std::vector<int32_t> sums;   // [rows, blocks]: sum of the block's values

  void quantize(const float* x, int64_t m, int64_t k);
  const int8_t* row(int64_t r) const { return values.data() + r * blocks * kBlockCols; }
};

}  // namespace strata::cpu::int8
