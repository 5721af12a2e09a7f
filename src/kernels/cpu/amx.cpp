// AMX products (amx.h). Tiles, all 16 rows x 64 bytes: 0 = A (16 input rows), 1 = B (a weight
// block), 2..5 = C (16 x 16 sums: int8 uses tile 2, bf16 tiles 2-5 for 64 input rows a pass).
#include "kernels/cpu/amx.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_bf16_dot.h"

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

constexpr int kTiles = 6;

TileConfig make_config() {
  TileConfig c;
  for (int t = 0; t < kTiles; ++t) {
    c.rows[t] = 16;
    c.bytes_per_row[t] = 64;
  }
  return c;
}

// CPUID leaf 7 EDX: AMX-BF16 is bit 22, AMX-TILE bit 24, AMX-INT8 bit 25.
bool has_amx_bit(int bit) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return ((d >> 24) & 1) && ((d >> bit) & 1) && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw");
}

// Asked once for the process, whichever format asks first.
bool tile_state_granted() {
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
}

}  // namespace

bool has_int8() {
  static const bool has = has_amx_bit(25) && tile_state_granted();
  return has;
}

bool has_bf16() {
  static const bool has =
      has_amx_bit(22) && __builtin_cpu_supports("avx512bf16") && tile_state_granted();
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

namespace {

constexpr int64_t kPairCols = 32;      // the columns one B tile covers: 16 pairs
constexpr int64_t kBlockDwords = 256;  // a B tile: 16 rows of 16 pairs

// A C tile's sums, stored to `c`, into y's rows r0.. (fewer than 16 at the end of the input) and
// columns n0..n0+cols-1.
void add_sums(const float* c, int64_t r0, int64_t rows, int64_t n0, int64_t cols, int64_t n,
              float* y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) y[(r0 + r) * n + n0 + j] += c[r * kGroupRows + j];
}

}  // namespace

// Whole 32-column blocks: one gather per tile row, 16 weight rows apart (rows past n masked to
// zero); the last block, when k ends inside it, pair by pair.
__attribute__((target("avx512f"))) void repack_group(const uint16_t* w, int64_t k, int64_t n,
                                                     int64_t n0, uint32_t* b) {
  const int64_t blocks = (k + kPairCols - 1) / kPairCols;
  const int64_t rows = std::min<int64_t>(kGroupRows, n - n0);
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  alignas(64) int32_t offsets[kGroupRows];
  for (int64_t j = 0; j < kGroupRows; ++j) offsets[j] = static_cast<int32_t>(j * k);
  const __m512i index = _mm512_load_si512(offsets);  // in bf16 elements: scale 2 below
  const uint16_t* group = w + n0 * k;
  const int64_t whole = k / kPairCols;
  for (int64_t blk = 0; blk < whole; ++blk)
    for (int64_t i = 0; i < kGroupRows; ++i)
      _mm512_storeu_si512(b + blk * kBlockDwords + i * kGroupRows,
                          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, index,
                                                      group + blk * kPairCols + 2 * i, 2));
  if (whole == blocks) return;
  uint32_t* tail = b + whole * kBlockDwords;
  std::fill_n(tail, kBlockDwords, 0u);
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t c = whole * kPairCols; c < k; ++c) {
      const uint32_t v = group[j * k + c];
      tail[(c % kPairCols) / 2 * kGroupRows + j] |= c % 2 ? v << 16 : v;
    }
}

__attribute__((target("amx-tile,amx-bf16"))) void linear_bf16(const float* x, int64_t m, int64_t k,
                                                              const uint16_t* w, int64_t n,
                                                              float* y) {
  // x in whole tiles: rows to a multiple of 16 and columns to a multiple of 32, zeros around.
  const int64_t blocks = (k + kPairCols - 1) / kPairCols, pitch = blocks * kPairCols;
  const int64_t padded_rows = (m + 15) / 16 * 16;
  thread_local std::vector<uint16_t> padded;
  padded.assign(static_cast<size_t>(padded_rows * pitch), 0);
  for (int64_t r = 0; r < m; ++r) bf16_dot::round_to_bf16(x + r * k, k, padded.data() + r * pitch);
  const uint16_t* xp = padded.data();
  const int64_t stride = pitch * static_cast<int64_t>(sizeof(uint16_t));
  const int64_t groups = (n + kGroupRows - 1) / kGroupRows;
#pragma omp parallel
  {
    Tiles tiles;  // this thread's tile configuration
    std::vector<uint32_t> packed(static_cast<size_t>(blocks * kBlockDwords));
    alignas(64) float c[16 * kGroupRows];
#pragma omp for schedule(dynamic, 4)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t n0 = g * kGroupRows, cols = std::min<int64_t>(kGroupRows, n - n0);
      repack_group(w, k, n, n0, packed.data());
      // 64 input rows a pass, one C tile per 16; every output sums its blocks in order.
      for (int64_t r0 = 0; r0 < padded_rows; r0 += 64) {
        const int64_t here = std::min<int64_t>(4, (padded_rows - r0) / 16);
        _tile_zero(2);
        _tile_zero(3);
        _tile_zero(4);
        _tile_zero(5);
        for (int64_t b = 0; b < blocks; ++b) {
          _tile_loadd(1, packed.data() + b * kBlockDwords, kGroupRows * sizeof(uint32_t));
          const uint16_t* a = xp + r0 * pitch + b * kPairCols;
          _tile_loadd(0, a, stride);
          _tile_dpbf16ps(2, 0, 1);
          if (here > 1) {
            _tile_loadd(0, a + 16 * pitch, stride);
            _tile_dpbf16ps(3, 0, 1);
          }
          if (here > 2) {
            _tile_loadd(0, a + 32 * pitch, stride);
            _tile_dpbf16ps(4, 0, 1);
          }
          if (here > 3) {
            _tile_loadd(0, a + 48 * pitch, stride);
            _tile_dpbf16ps(5, 0, 1);
          }
        }
        // (The tile operand of _tile_stored must be a literal.)
        auto rows = [&](int t) { return std::clamp<int64_t>(m - (r0 + 16 * t), 0, 16); };
        const size_t c_stride = kGroupRows * sizeof(float);
        _tile_stored(2, c, c_stride);
        add_sums(c, r0, rows(0), n0, cols, n, y);
        if (here > 1) {
          _tile_stored(3, c, c_stride);
          add_sums(c, r0 + 16, rows(1), n0, cols, n, y);
        }
        if (here > 2) {
          _tile_stored(4, c, c_stride);
          add_sums(c, r0 + 32, rows(2), n0, cols, n, y);
        }
        if (here > 3) {
          _tile_stored(5, c, c_stride);
          add_sums(c, r0 + 48, rows(3), n0, cols, n, y);
        }
      }
    }
  }
}

#pragma GCC diagnostic pop

}  // namespace strata::cpu::amx
