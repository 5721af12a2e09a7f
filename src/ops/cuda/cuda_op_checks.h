#pragma once
// What CudaOps' files share (internal to ops/cuda): a tensor as a kernel's view, the kernels'
// activation codes, and the argument checks every op makes before it launches anything.
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cuda/tensor_ops.h"
#include "ops/ops.h"

namespace strata::cuda_op {

inline bool is_float(DType d) {
  return d == DType::F32 || d == DType::BF16;
}

inline cuda::View view(const Tensor& t) {
  return {t.raw(), t.row_stride(), t.dtype()};
}

inline cuda::Act act_of(Activation a) {
  switch (a) {
    case Activation::Silu:
      return cuda::Act::Silu;
    case Activation::Gelu:
      return cuda::Act::Gelu;
    case Activation::GeluTanh:
      return cuda::Act::GeluTanh;
    case Activation::Relu2:
      return cuda::Act::Relu2;
    case Activation::ClampedSwiglu:
      return cuda::Act::ClampedSwiglu;
  }
  fail("unknown activation");
}

}  // namespace strata::cuda_op

// Checks shared by every op: the tensor lives on this GPU and has a dtype the kernels read.
#define STRATA_CHECK_DEVICE(t, what)                                                        \
  STRATA_CHECK((t).device() == device() && ((t).empty() || cuda_op::is_float((t).dtype())), \
               "cuda op {}: a {} tensor (wants f32 or bf16 on {})", what, (t).describe(),   \
               device().str())
#define STRATA_CHECK_I32(t, what)                                                              \
  STRATA_CHECK((t).device() == device() && (t).dtype() == DType::I32 && (t).contiguous(),      \
               "cuda op {}: a {} tensor (wants contiguous int32 on {})", what, (t).describe(), \
               device().str())
