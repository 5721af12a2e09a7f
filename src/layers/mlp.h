#pragma once
// The ungated MLP: down_proj(act(up_proj(x))), as NemotronH's MLP layers and experts use it
// with act = relu2 (squared ReLU).
#include <string>

#include "layers/linear.h"

namespace strata {

class UngatedMLP {
 public:
  UngatedMLP(ParamLoader& w, const std::string& prefix, int hidden, int intermediate,
             Activation act, bool bias = false);
  // residual += down(act(up x))
  void forward(Ops& ops, const Tensor& x, Tensor& residual) const;

 private:
  Linear up_, down_;
  Activation act_;
};

}  // namespace strata
