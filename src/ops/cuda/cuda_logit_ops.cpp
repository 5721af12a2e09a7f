// CudaOps' ops on the logits: greedy and sampled draws, the logit edits (penalties, bias), grammar
// masks and logprobs, each over every row of the pass in one launch, with the host reference's
// rules (ops/sampling.h, ops/logit_edits.h, ops/token_masks.h, ops/logprobs.h).
#include "kernels/cuda/logit_ops.h"
#include "kernels/cuda/sampling.h"
#include "ops/cuda/cuda_op_checks.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/logit_edits.h"
#include "ops/logprobs.h"
#include "ops/sampling.h"
#include "ops/token_masks.h"

namespace strata {

using cuda_op::view;

void CudaOps::argmax(const Tensor& logits, Tensor& ids) {
  STRATA_CHECK_DEVICE(logits, "argmax logits");
  STRATA_CHECK_I32(ids, "argmax ids");
  STRATA_CHECK(ids.numel() == logits.rows(), "argmax of {} into {}", logits.describe(),
               ids.describe());
  cuda::argmax_2d(view(logits), logits.rows(), logits.cols(), ids.ptr<int32_t>(), stream_);
}

void CudaOps::sample(const Tensor& logits, const Tensor& rows, Tensor& ids) {
  STRATA_CHECK_DEVICE(logits, "sample logits");
  STRATA_CHECK_I32(rows, "sampling rows");
  STRATA_CHECK_I32(ids, "sampled ids");
  STRATA_CHECK(logits.dtype() == DType::F32 && rows.dtype() == DType::I32 &&
                   rows.numel() == logits.rows() * kSamplingRowInts && ids.numel() == logits.rows(),
               "sample of {} with rows {} into {}", logits.describe(), rows.describe(),
               ids.describe());
  cuda::sample_rows(logits.ptr<float>(), logits.row_stride(), logits.rows(), logits.cols(),
                    rows.ptr<int32_t>(), ids.ptr<int32_t>(), stream_);
}

void CudaOps::edit_logits(Tensor& logits, const Tensor& edits) {
  STRATA_CHECK_DEVICE(logits, "edited logits");
  STRATA_CHECK_I32(edits, "logit edits");
  STRATA_CHECK(logits.dtype() == DType::F32 && edits.numel() % kLogitEditInts == 0,
               "edit_logits of {} with {}", logits.describe(), edits.describe());
  cuda::edit_logits(logits.ptr<float>(), logits.row_stride(), logits.rows(), logits.cols(),
                    edits.ptr<int32_t>(), edits.numel() / kLogitEditInts, stream_);
}

void CudaOps::mask_logits(Tensor& logits, const Tensor& rows, const Tensor& masks) {
  STRATA_CHECK_DEVICE(logits, "masked logits");
  STRATA_CHECK_I32(rows, "masked rows");
  STRATA_CHECK_I32(masks, "token masks");
  STRATA_CHECK(logits.dtype() == DType::F32 &&
                   masks.numel() == rows.numel() * 2 * token_mask_words(logits.cols()),
               "token masks {} for rows {} of {}", masks.describe(), rows.describe(),
               logits.describe());
  cuda::mask_logits(logits.ptr<float>(), logits.row_stride(), logits.rows(), logits.cols(),
                    rows.ptr<int32_t>(), masks.ptr<int32_t>(), rows.numel(), stream_);
}

void CudaOps::logprobs(const Tensor& logits, const Tensor& ids, int top_n, Tensor& out) {
  STRATA_CHECK_DEVICE(logits, "logprobs logits");
  STRATA_CHECK_I32(ids, "logprobs ids");
  STRATA_CHECK_DEVICE(out, "logprobs out");
  STRATA_CHECK(logits.dtype() == DType::F32 && ids.numel() == logits.rows() &&
                   out.dtype() == DType::F32 && out.contiguous() &&
                   out.numel() == logits.rows() * logprob_row_width(top_n) && top_n >= 0 &&
                   top_n <= kMaxTopLogprobs,
               "logprobs of {} at {} (top {}) into {}", logits.describe(), ids.describe(), top_n,
               out.describe());
  cuda::logprobs(logits.ptr<float>(), logits.row_stride(), logits.rows(), logits.cols(),
                 ids.ptr<int32_t>(), top_n, out.ptr<float>(), stream_);
}

}  // namespace strata
