// CudaOps' mixture-of-experts ops: the router's top-k (kernels/cuda/moe.h route) and the routed
// experts as a sort of (token, expert) pairs, two grouped GEMMs and a weighted combine. The same
// contracts as the CPU reference (ops/cpu_ops.cpp).
#include "kernels/cuda/moe.h"
#include "ops/cuda/cuda_op_checks.h"
#include "ops/cuda/cuda_ops.h"

namespace strata {

using cuda_op::act_of;
using cuda_op::view;

void CudaOps::route(const RouterConfig& cfg, const Tensor& router_logits, const Tensor* bias,
                    Tensor& ids, Tensor& weights) {
  cfg.validate();
  STRATA_CHECK_DEVICE(router_logits, "route logits");
  STRATA_CHECK_I32(ids, "route ids");
  const int64_t t = router_logits.rows();
  STRATA_CHECK(router_logits.cols() == cfg.num_experts && ids.numel() == t * cfg.top_k &&
                   weights.numel() == t * cfg.top_k && weights.dtype() == DType::F32 &&
                   weights.contiguous() && weights.device() == device(),
               "route {} -> ids {}, weights {} (top {})", router_logits.describe(), ids.describe(),
               weights.describe(), cfg.top_k);
  const float* b = nullptr;
  if (cfg.correction_bias) {
    STRATA_CHECK(bias && bias->device() == device() && bias->dtype() == DType::F32 &&
                     bias->numel() == cfg.num_experts,
                 "route: correction bias {} for {} experts", bias ? bias->describe() : "none",
                 cfg.num_experts);
    b = bias->ptr<float>();
  }
  cuda::RouteParams p;
  p.num_experts = cfg.num_experts;
  p.top_k = cfg.top_k;
  p.sigmoid = cfg.scoring == RouterScoring::Sigmoid;
  p.num_groups = cfg.num_groups;
  p.topk_groups = cfg.topk_groups;
  p.group_top_two = cfg.group_score == GroupScore::TopTwoSum;
  p.normalize = cfg.normalize_topk;
  p.scaling = cfg.routed_scaling_factor;
  cuda::route(view(router_logits), t, b, p, ids.ptr<int32_t>(), weights.ptr<float>(), stream_);
}

void CudaOps::experts(const ExpertWeights& w, const Tensor& x, const Tensor& ids,
                      const Tensor& weights, Tensor& out) {
  STRATA_CHECK_DEVICE(x, "experts input");
  STRATA_CHECK_DEVICE(out, "experts output");
  STRATA_CHECK_I32(ids, "experts ids");
  const int64_t t = x.rows(), hidden = w.hidden, inter = w.intermediate, k = ids.cols();
  const int64_t in_rows = (w.gated ? 2 : 1) * inter, e = w.num_experts;
  STRATA_CHECK(x.cols() == hidden && ids.numel() == t * k && weights.numel() == t * k &&
                   weights.dtype() == DType::F32 && weights.contiguous() &&
                   weights.device() == device() && out.rows() == t && out.cols() == hidden,
               "experts over {} with ids {}, weights {} -> {}", x.describe(), ids.describe(),
               weights.describe(), out.describe());
  STRATA_CHECK(w.w_in.dtype() == DType::BF16 && w.w_in.device() == device() &&
                   w.w_in.numel() == e * in_rows * hidden && w.w_down.dtype() == DType::BF16 &&
                   w.w_down.device() == device() && w.w_down.numel() == e * hidden * inter,
               "expert weights {} and {} for {} experts of {} x {}", w.w_in.describe(),
               w.w_down.describe(), e, hidden, inter);
  for (const Tensor* b : {&w.b_in, &w.b_down})
    STRATA_CHECK(b->empty() || (b->dtype() == DType::F32 && b->device() == device()),
                 "expert bias {}: wants f32 on {}", b->describe(), device().str());
  STRATA_CHECK(hidden <= INT32_MAX && in_rows <= INT32_MAX, "experts of {} x {}", hidden, inter);
  if (t == 0) return;
  const int64_t pairs = t * k;
  const Tensor xb = as_bf16(x);
  // The sort's outputs in one workspace tensor: perm, tokens, then the three tile arrays.
  cuda::MoeSort s;
  s.max_tiles = cuda::moe_max_tiles(pairs, static_cast<int>(e));
  Tensor meta = empty({2 * pairs + 3 * s.max_tiles}, DType::I32);
  int32_t* m = meta.ptr<int32_t>();
  s.perm = m;
  s.tokens = m + pairs;
  s.tile_expert = m + 2 * pairs;
  s.tile_start = s.tile_expert + s.max_tiles;
  s.tile_end = s.tile_start + s.max_tiles;
  cuda::moe_sort(ids.ptr<int32_t>(), pairs, static_cast<int>(k), static_cast<int>(e), s, stream_);

  // h [sorted pairs, in_rows] = x[token] . W_in_e^T; act [sorted pairs, I] bf16 (the next
  // GEMM's input); y [pairs, H] = act . W_down_e^T, written back in pair order.
  Tensor h = empty({pairs, in_rows}, DType::F32);
  cuda::moe_grouped_gemm(xb.ptr<cuda::bf16>(), xb.row_stride(), s.tokens, w.w_in.ptr<cuda::bf16>(),
                         w.b_in.empty() ? nullptr : w.b_in.ptr<float>(), static_cast<int>(in_rows),
                         static_cast<int>(hidden), nullptr, h.ptr<float>(), in_rows, s, stream_);
  Tensor act = empty({pairs, inter}, DType::BF16);
  if (w.gated)
    cuda::gated_act_2d(view(h), act_of(w.activation), pairs, inter, view(act), stream_);
  else
    cuda::act_2d(view(h), act_of(w.activation), pairs, inter, view(act), stream_);
  Tensor y = empty({pairs, hidden}, DType::F32);
  cuda::moe_grouped_gemm(act.ptr<cuda::bf16>(), inter, nullptr, w.w_down.ptr<cuda::bf16>(),
                         w.b_down.empty() ? nullptr : w.b_down.ptr<float>(),
                         static_cast<int>(hidden), static_cast<int>(inter), s.perm, y.ptr<float>(),
                         hidden, s, stream_);
  cuda::moe_combine(y.ptr<float>(), weights.ptr<float>(), ids.ptr<int32_t>(), static_cast<int>(e),
                    t, static_cast<int>(k), static_cast<int>(hidden), view(out), stream_);
}

}  // namespace strata
