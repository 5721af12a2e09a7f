// AMX-INT8 products for cpu::linear_int8 (int8_amx.h). Tiles: 0 = A (16 activation rows x 64
// bytes), 1 = B (a weight block: 16 tile rows x 64 bytes), 2 = C (16 x 16 int32).
#include "kernels/cpu/int8_amx.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace strata::cpu::amx {

namespace {

using int8::kBlockBytes;
using int8::kBlockCols;
using int8::kGroupRows;
using int8::kTileBytes;
using int8::kTileRowBytes;

// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): Linux's request for the tile state.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The LDTILECFG operand: palette 1, each tile's rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

TileConfig make_config() {
  TileConfig c;
  for (int t = 0; t < 3; ++t) {
    c.rows[t] = 16;
    c.bytes_per_row[t] = 64;
  }
  return c;
}

}  // namespace

bool has_int8() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    return tile && int8 && avx512 &&
           syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
}

namespace {

__attribute__((target("amx-tile"))) void load_config() {
  static const TileConfig config = make_config();
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void release_tiles() {
  _tile_release();
}

}  // namespace

Tiles::Tiles() {
  load_config();
}

Tiles::~Tiles() {
  release_tiles();
}

// (GCC 12 warns inside its own AVX-512 intrinsics, whose masked forms start from undefined
// registers: a known false positive, silenced here as in the other AVX-512 kernels.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw"))) void group_product(
    const int8::QuantizedRows& x, int64_t r0, int64_t rows, const uint8_t* group, float* out) {
  const int64_t pitch = x.blocks * kBlockCols;  // bytes from one activation row to the next
  alignas(64) int32_t c[16 * kGroupRows];
  std::fill_n(out, rows * kGroupRows, 0.0f);
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* tile = group + b * kBlockBytes;
    _tile_loadd(1, tile, kTileRowBytes);
    const __m512 sw = _mm512_loadu_ps(reinterpret_cast<const float*>(tile + kTileBytes));
    for (int64_t t0 = 0; t0 < rows; t0 += 16) {
      _tile_loadd(0, x.row(r0 + t0) + b * kBlockCols, pitch);
      _tile_zero(2);
      _tile_dpbsud(2, 0, 1);
      _tile_stored(2, c, 16 * sizeof(int32_t));
      for (int64_t r = 0; r < std::min<int64_t>(16, rows - t0); ++r) {
        const int64_t at = (r0 + t0 + r) * x.blocks + b;
        // As the VNNI kernel: the weights were stored + 128, so 128 * sum(x) comes back out;
        // then the same multiply and fused add, block after block.
        const __m512i exact =
            _mm512_sub_epi32(_mm512_load_si512(c + 16 * r), _mm512_set1_epi32(128 * x.sums[at]));
        float* o = out + (t0 + r) * kGroupRows;
        _mm512_store_ps(
            o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact),
                               _mm512_mul_ps(sw, _mm512_set1_ps(x.scales[at])), _mm512_load_ps(o)));
      }
    }
  }
}

#pragma GCC diagnostic pop

}  // namespace strata::cpu::amx
