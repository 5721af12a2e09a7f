#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace strata {

// Q8 is no checkpoint dtype: it is how the CPU keeps weight matrices under --quantization int8,
// int8 values with one f32 scale per kQ8BlockCols columns of a row, packed in groups of
// kQ8GroupRows rows for its int8 dot products (kernels/cpu/int8_weights.h has the layout).
enum class DType { F32, F16, BF16, I64, I32, I8, U8, BOOL, F64, Q8 };

constexpr int64_t kQ8GroupRows = 16;  // weight rows a packed group holds (one per SIMD lane)
constexpr int64_t kQ8BlockCols = 64;  // columns sharing one scale (one 64-byte vector)

// Bytes per element (1 for Q8: its values; the scales come on top, see storage_bytes).
size_t dtype_size(DType t);
// Bytes a contiguous [rows, cols] tensor of `t` occupies: rows * cols * dtype_size, and for Q8
// the packed layout's (rows and cols padded to whole groups and blocks, plus the scales).
size_t storage_bytes(DType t, int64_t rows, int64_t cols);
std::string dtype_name(DType t);
// Parses a safetensors dtype string ("F32", "BF16", ...); returns false when unknown.
bool parse_safetensors_dtype(const std::string& s, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even, as torch does.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return 0x7fc0;  // NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);

// Converts n elements of a floating dtype to f32.
void convert_to_f32(DType t, const void* src, float* dst, size_t n);

}  // namespace strata
