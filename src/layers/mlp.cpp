#include "layers/mlp.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace strata {

UngatedMLP::UngatedMLP(WeightSource& w, const std::string& prefix, int hidden, int intermediate,
                       const std::string& act, bool bias) {
  if (act == "relu2")
    act_ = Act::Relu2;
  else if (act == "silu" || act == "swish")
    act_ = Act::Silu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh")
    act_ = Act::GeluTanh;
  else
    fail(
        "config.json: MLP activation '{}' is not supported (supported: relu2, silu, "
        "gelu_pytorch_tanh)",
        act);
  up_ = Linear::load(w, prefix + ".up_proj", hidden, intermediate, bias);
  down_ = Linear::load(w, prefix + ".down_proj", intermediate, hidden, bias);
}

Tensor UngatedMLP::forward(const Tensor& x) const {
  Tensor h = up_.forward(x);
  float* v = h.data();
  for (int64_t i = 0; i < h.numel(); ++i) {
    switch (act_) {
      case Act::Relu2:
        v[i] = v[i] > 0.0f ? v[i] * v[i] : 0.0f;
        break;
      case Act::Silu:
        v[i] = cpu::silu(v[i]);
        break;
      case Act::GeluTanh: {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        v[i] = 0.5f * v[i] *
               (1.0f + std::tanh(kSqrt2OverPi * (v[i] + 0.044715f * v[i] * v[i] * v[i])));
        break;
      }
    }
  }
  return down_.forward(h);
}

}  // namespace strata
