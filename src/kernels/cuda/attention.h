#pragma once
// Attention over a paged bf16 KV cache on the GPU. Keys of request b at position p live in
// cache row req_to_token[req_pool_indices[b] * req_to_token_stride + p]; widths come from the
// pool's layout report (DESIGN.md §1.2), never from the model config.
#include <cstdint>

#include "kernels/cuda/ops.h"

namespace strata::cuda {

struct DeviceKV {
  const bf16* k = nullptr;  // [slots, k_row_stride]
  const bf16* v = nullptr;  // [slots, v_row_stride]; may alias k (value inside the key row)
  int64_t k_row_stride = 0, v_row_stride = 0;
  int num_kv_heads = 0, k_head_dim = 0, v_head_dim = 0;
};

// Head widths the kernels take: multiples of 8 up to these. Decode spreads a row over a
// warp's lanes (16 bytes per lane per pass, up to four passes); extend keeps query, key and
// output tiles of the row width in shared memory, which bounds it (227 KB per block on
// sm_90). A model runs on CUDA when its cached rows fit both.
constexpr int kMaxDecodeHeadWidth = 1024;
constexpr int kMaxExtendHeadWidth = 640;
constexpr int kMaxAttentionHeadWidth =
    kMaxDecodeHeadWidth < kMaxExtendHeadWidth ? kMaxDecodeHeadWidth : kMaxExtendHeadWidth;

struct PagedBatch {
  const int32_t* req_to_token = nullptr;
  int req_to_token_stride = 0;
  const int32_t* req_pool_indices = nullptr;  // [B]
  const int32_t* prefix_lens = nullptr;       // [B]
  const int32_t* token_offsets = nullptr;     // [B + 1] first new token of each request
  int batch = 0;
};

struct AttentionParams {
  int num_q_heads = 0;
  int64_t q_row_stride = 0;  // floats between tokens' q rows; 0: num_q_heads * k_head_dim
  float scale = 1.0f;
  int sliding_window = 0;  // 0: attend to everything before
  float softcap = 0.0f;    // 0: off
  // Per q head, a sink logit that joins the softmax's denominator only (gpt-oss); f32 device
  // [num_q_heads], null: none.
  const float* sinks = nullptr;
};

// Split-KV decode, as SGLang's Triton backend: stage 1 attends each request's KV range in
// `num_splits` pieces, the query heads of one KV head together (each key is read once per
// group: on tensor cores for 64- and 128-wide heads and for MLA's 576 / 512 latent (blocks of
// 16 or 32 heads), else per group of up to 8 heads, 2 for rows wider than 256), writing
// partial outputs
// [batch, heads, splits, Lv] (Lv = kv.v_head_dim, the pool's value width: kv_lora_rank for
// MLA) and their log-sum-exp; stage 2 merges the splits. q [B, Hq * Dk] (one new token per
// request); out [B, Hq * Dv]. partial_out / partial_lse must hold batch * Hq * num_splits * (Lv |
// 1) floats.
struct DecodeWorkspace {
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
  int num_splits = 1;
  // > 0: the CUDA-core lane kernel with this many keys loaded ahead per lane group (1, 2, 4,
  // 8), even where the tensor-core kernel applies (the bench compares them); 0: the default.
  int unroll = 0;
  // Tiles in the tensor-core kernel's cp.async ring (2, 3, 4); 0: the default.
  int tile_stages = 0;
  // Query heads a block of the MLA latent kernel scores (16 or 32); 0: the default (32 once
  // there are more than 16 heads). The bench compares them.
  int mla_head_block = 0;
  // Warps a block of the tensor-core kernel runs, 16 keys of each tile apiece (2 or 4; the
  // tile is 32 or 64 keys); 0: the default.
  int tile_warps = 0;
};
// Tuned on the H200 (bench sweeps, docs/benchmarks-cuda.md). Lane kernel: fewer keys in
// flight per lane but more resident blocks won (2: 52% of copy bandwidth at 64 x 4096, 4: 37%,
// 8: 24%). Tensor-core kernel: two tiles in the ring (more shared memory per block cost more
// in resident blocks than the deeper ring gained: 2 stages 87%, 3: 79%, 4: 50% at 64 x 4096
// with a split target of 8 blocks per SM; 87% at 8 x 32768, 79% at 256 x 1100). The lane
// kernel is within a point at either split target.
constexpr int kDefaultDecodeUnroll = 2;
constexpr int kDefaultDecodeBlocksPerSm = 8;
constexpr int kDefaultDecodeTileStages = 2;
// The tensor-core kernel at 128-wide heads (H100 sweeps of 2026-12-07, after a warm-up, GQA 32 /
// 8): 2 warps a block (32-key tiles: 6 resident blocks a SM where 64-key tiles fit 3) with a
// split target of 2 blocks per SM beat 4 warps at 8 at 64 x 1100 (0.112 against 0.120 ms, 85% of
// copy), 8 x 1100 (0.022 / 0.035), 64 x 4096 (0.370 / 0.384) and 8 x 32768 (0.366 / 0.377); it
// lost 1.2% at 256 x 1100 and tied at batch 1. 64-wide heads were not swept and keep 4 warps and
// 8 blocks per SM.
constexpr int kDefaultDecodeTileWarps = 2;
constexpr int kDefaultDecodeTileWarpsD64 = 4;
constexpr int kDefaultTilesD128DecodeBlocksPerSm = 2;
// MLA's latent kernel holds one block per SM (a 64-key tile of 576-wide rows is 73 KB), so a
// target of 8 blocks per SM only cut each request into more splits for stage 2 to merge: in
// the H100 sweep of 2026-12-06 a target of 2 won every batched row (64 x 4096: 0.171 against
// 0.198 ms at 16 heads, 0.547 against 0.750 ms at 128 heads).
constexpr int kDefaultMlaDecodeBlocksPerSm = 2;
// The split target a cached layout's decode kernel was tuned at: the MLA latent's (one KV
// head whose value is the key row's leading 512 of 576 columns), the tensor-core kernel's at
// 128-wide heads, or everyone else's.
int default_decode_blocks_per_sm(int num_kv_heads, int k_head_dim, int v_head_dim, bool v_in_k);
void decode_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, const DecodeWorkspace& ws, bf16* out,
                      cudaStream_t stream);
void decode_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, const DecodeWorkspace& ws, float* out,
                      cudaStream_t stream);

// Which stage-1 kernel decode_attention runs for these arguments: "mla_tiles" (tensor cores,
// MLA's latent), "tiles" (tensor cores, 64/128-wide heads) or "lanes" (CUDA cores, every
// layout). The bench labels its rows with it and the tests check that they reach the kernel
// they mean to.
const char* decode_kernel_name(const DeviceKV& kv, const PagedBatch& batch,
                               const AttentionParams& p, const DecodeWorkspace& ws);

// KV splits for a decode batch: enough blocks to fill the GPU several times over, but no
// split shorter than a useful stretch of keys.
// `blocks_per_sm`: the target (default_decode_blocks_per_sm for the layout's tuned one).
int choose_decode_splits(int batch, int num_kv_heads, int max_seq_len, int num_sms,
                         int blocks_per_sm);
constexpr int kMaxDecodeSplits = 32;

// Extend (prefill, chunked prefill): each new token attends causally to its request's cached
// prefix and the new tokens up to itself (all already written to the cache), within the
// sliding window. bf16 tensor-core tiles (mma.sync for 64- and 128-wide heads, WMMA for the
// other widths), online softmax in f32.
// q [T, Hq * Dk]; out [T, Hq * Dv]; `max_extend` = the longest extend in the batch.
// `rows_per_warp` (16 or 32) sets the register-tiled kernel's query rows per warp for the
// bench's and the tests' side-by-side runs; 0: extend_rows_per_warp(max_extend, batch.batch).
void extend_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, int max_extend, bf16* out, cudaStream_t stream,
                      int rows_per_warp = 0);
void extend_attention(const float* q, const DeviceKV& kv, const PagedBatch& batch,
                      const AttentionParams& p, int max_extend, float* out, cudaStream_t stream,
                      int rows_per_warp = 0);
int extend_rows_per_warp(int max_extend, int batch);

}  // namespace strata::cuda
