#include "layers/mlp.h"

#include "core/error.h"

namespace strata {

UngatedMLP::UngatedMLP(ParamLoader& w, const std::string& prefix, int hidden, int intermediate,
                       Activation act, bool bias)
    : act_(act) {
  // Tensor parallelism: this rank's intermediate columns; down_proj sums them.
  const Communicator& group = w.tensor_parallel();
  STRATA_CHECK(intermediate % group.size() == 0, "{}: intermediate size {} over {} ranks", prefix,
               intermediate, group.size());
  up_ = Linear::load_column_parallel(w, {prefix + ".up_proj"}, hidden, {intermediate},
                                     {Shard{group.rank(), group.size()}}, bias);
  down_ = Linear::load_row_parallel(w, prefix + ".down_proj", intermediate, hidden, bias);
}

void UngatedMLP::forward(Ops& ops, const Tensor& x, Tensor& residual) const {
  const Tensor h = up_.forward(ops, x);
  Tensor act = ops.empty_activation({h.rows(), h.cols()});
  ops.activation(h, act_, act);
  down_.forward_into(ops, act, residual, /*accumulate=*/true);
}

}  // namespace strata
