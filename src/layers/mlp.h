#pragma once
// The ungated MLP: down_proj(act(up_proj(x))), as NemotronH's MLP layers and experts use it
// with act = relu2 (squared ReLU).
#include <string>

#include "layers/linear.h"

namespace strata {

class UngatedMLP {
 public:
  UngatedMLP(WeightSource& w, const std::string& prefix, int hidden, int intermediate,
             const std::string& act, bool bias = false);
  Tensor forward(const Tensor& x) const;

 private:
  enum class Act { Relu2, Silu, GeluTanh };
  Linear up_, down_;
  Act act_;
};

}  // namespace strata
