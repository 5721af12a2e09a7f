#pragma once
// Token sampling on the GPU (ops/sampling.h states the rule; the CPU reference is
// ops/sampling.cpp). ids[r] = the draw from row r of `logits` (f32, rows x vocab, row stride
// `stride`) under sampling_rows[r] (packed SamplingRow, kSamplingRowInts int32 each).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

void sample_rows(const float* logits, int64_t stride, int64_t rows, int64_t vocab,
                 const int32_t* sampling_rows, int32_t* ids, cudaStream_t stream);

}  // namespace strata::cuda
