#include "ops/ops.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

Activation parse_activation(const std::string& name, const std::string& field) {
  if (name == "silu" || name == "swish") return Activation::Silu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_tanh") return Activation::GeluTanh;
  if (name == "gelu") return Activation::Gelu;
  if (name == "relu2") return Activation::Relu2;
  fail("config.json: {} '{}' is not supported (supported: silu, gelu, gelu_pytorch_tanh, relu2)",
       field, name);
}

void RouterConfig::validate() const {
  if (num_experts <= 0) fail("config.json: MoE needs n_routed_experts > 0, got {}", num_experts);
  if (top_k <= 0 || top_k > num_experts)
    fail("config.json: num_experts_per_tok {} must be between 1 and the {} routed experts", top_k,
         num_experts);
  if (num_groups <= 0 || num_experts % num_groups != 0)
    fail("config.json: n_group {} must divide n_routed_experts {}", num_groups, num_experts);
  if (topk_groups <= 0 || topk_groups > num_groups)
    fail("config.json: topk_group {} must be between 1 and n_group {}", topk_groups, num_groups);
  const int per_group = num_experts / num_groups;
  if (group_score == GroupScore::TopTwoSum && num_groups > 1 && per_group < 2)
    fail(
        "config.json: grouped routing ranks groups by their two best experts, so each of the {} "
        "groups needs at least 2 experts (n_routed_experts {})",
        num_groups, num_experts);
  if (top_k > topk_groups * per_group)
    fail(
        "config.json: num_experts_per_tok {} exceeds the {} experts in the topk_group {} groups "
        "a token may use: raise topk_group or lower num_experts_per_tok",
        top_k, topk_groups * per_group, topk_groups);
}

Tensor Ops::zeros(std::vector<int64_t> shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  fill(t, 0.0f);
  return t;
}

Tensor Ops::linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  Tensor y = empty({x.rows(), w.dim(0)});
  linear(x, w, bias, y, false);
  return y;
}

Tensor Ops::rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset) {
  Tensor out = empty_activation({x.rows(), x.cols()});
  rms_norm(x, w, eps, weight_offset, out);
  return out;
}

}  // namespace strata
