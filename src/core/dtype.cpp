#include "core/dtype.h"

#include <cmath>
#include <map>

#include "core/error.h"

namespace strata {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I64:
      return 8;
    case DType::I32:
      return 4;
    case DType::I8:
      return 1;
    case DType::U8:
      return 1;
    case DType::BOOL:
      return 1;
    case DType::F64:
      return 8;
    case DType::Q8:
      return 1;
  }
  return 0;
}

size_t storage_bytes(DType t, int64_t rows, int64_t cols) {
  if (t != DType::Q8) return static_cast<size_t>(rows * cols) * dtype_size(t);
  const int64_t groups = (rows + kQ8GroupRows - 1) / kQ8GroupRows;
  const int64_t blocks = (cols + kQ8BlockCols - 1) / kQ8BlockCols;
  // Each block of a group: kQ8GroupRows x kQ8BlockCols int8 values, then a f32 scale per row.
  return static_cast<size_t>(groups * blocks * kQ8GroupRows * (kQ8BlockCols + 4));
}

std::string dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
    case DType::BOOL:
      return "BOOL";
    case DType::F64:
      return "F64";
    case DType::Q8:
      return "Q8";
  }
  return "?";
}

bool parse_safetensors_dtype(const std::string& s, DType* out) {
  static const std::map<std::string, DType> kNames = {
      {"F32", DType::F32}, {"F16", DType::F16},   {"BF16", DType::BF16},
      {"I64", DType::I64}, {"I32", DType::I32},   {"I8", DType::I8},
      {"U8", DType::U8},   {"BOOL", DType::BOOL}, {"F64", DType::F64}};
  auto it = kNames.find(s);
  if (it == kNames.end()) return false;
  *out = it->second;
  return true;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

void convert_to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    // Checkpoint data need not be aligned (safetensors headers have any length): load each
    // element through memcpy, never through a misaligned pointer.
    case DType::BF16: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    }
    case DType::F64: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, s + 8 * i, 8);
        dst[i] = static_cast<float>(d);
      }
      return;
    }
    default:
      fail("cannot convert a {} tensor to floating point", dtype_name(t));
  }
}

}  // namespace strata
