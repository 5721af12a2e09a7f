#include "dist/communicator.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

void SingleRankCommunicator::all_gather_cols(const Tensor& part, Tensor& out) {
  STRATA_CHECK(part.rows() == out.rows() && part.cols() == out.cols(),
               "a group of one rank gathers {} into {}", part.describe(), out.describe());
  for (int64_t r = 0; r < part.rows(); ++r) std::copy_n(part.row(r), part.cols(), out.row(r));
}

}  // namespace strata
