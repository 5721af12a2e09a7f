#pragma once
// CPU attention kernels over a paged KV cache. Softmax is computed in the streaming
// (running max, running sum) form so a KV range can be split and merged exactly the way
// the CUDA split-KV decode kernel does it.
#include <cstdint>

#include "kernels/cpu/gemm.h"  // Simd

namespace strata::cpu {

// Where one layer's cache lives and how to read one KV head of it.
struct PagedKV {
  const float* k = nullptr;  // [slots, k_row_stride]
  const float* v = nullptr;  // [slots, v_row_stride]; may alias k (MLA latent)
  int64_t k_row_stride = 0, v_row_stride = 0;
  int k_head_dim = 0, v_head_dim = 0;
};

// Softmax partial over one KV range: out = sum_j p_j v_j / sum_j p_j, lse = log sum_j e^{s_j}.
// lse is -inf (and out zero) when the range is empty.
struct ScoreParams {
  float scale = 1.0f;
  float softcap = 0.0f;
};

// `simd`: Simd::Portable forces the portable loops; any other level takes AVX-512 where the CPU
// has it and both head widths are whole 16-float vectors. Every level gives the same bits.
void attend_range(const float* q, const PagedKV& kv, int kv_head, const int32_t* slots, int begin,
                  int end, const ScoreParams& p, float* scratch_scores, float* out, float* lse,
                  Simd simd = Simd::Best);

// attend_range for `heads` query heads that share kv_head (a GQA group; MLA's heads over the one
// latent): q holds their rows dk apart, head h's output goes to out + h out_stride and its lse
// to lse[h lse_stride]; scratch_scores holds heads * (end - begin). On AVX-512 each key and
// value row is read once for up to eight heads. Every head's bits are attend_range's.
void attend_group_range(const float* q, int heads, const PagedKV& kv, int kv_head,
                        const int32_t* slots, int begin, int end, const ScoreParams& p,
                        float* scratch_scores, float* out, int64_t out_stride, float* lse,
                        int64_t lse_stride, Simd simd = Simd::Best);

// Merges `n` partials (out_i [Dv], lse_i) into out; a sink logit (or -inf) joins the
// denominator only.
void merge_partials(const float* partial_out, const float* partial_lse, int n, int v_head_dim,
                    float sink, float* out);

}  // namespace strata::cpu
