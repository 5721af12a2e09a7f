#include "layers/mlp.h"

namespace strata {

UngatedMLP::UngatedMLP(ParamLoader& w, const std::string& prefix, int hidden, int intermediate,
                       Activation act, bool bias)
    : act_(act) {
  up_ = Linear::load(w, prefix + ".up_proj", hidden, intermediate, bias);
  down_ = Linear::load(w, prefix + ".down_proj", intermediate, hidden, bias);
}

void UngatedMLP::forward(Ops& ops, const Tensor& x, Tensor& residual) const {
  const Tensor h = up_.forward(ops, x);
  Tensor act = ops.empty_activation({h.rows(), h.cols()});
  ops.activation(h, act_, act);
  down_.forward_into(ops, act, residual, /*accumulate=*/true);
}

}  // namespace strata
