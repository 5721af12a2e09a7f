#pragma once
// Picking a tensor-parallel rank's rows out of a checkpoint tensor whose rows are several
// sections, each split its own way (a recurrent mixer's fused in_proj: Mamba2's z | x | B | C |
// dt, LFM2's B | C | x; their conv channels), on the host at load time.
#include <algorithm>
#include <vector>

#include "core/tensor.h"

namespace strata {

// Rows [begin, begin + size) of a section of the tensor that starts at row `offset`.
struct RowSection {
  int64_t offset = 0, begin = 0, size = 0;
};

// The rows of `sections` of `whole` (host f32, rows of `row_width` elements), concatenated in
// order: [rows] when row_width is 1, else [rows, row_width].
inline Tensor pick_rows(const Tensor& whole, int64_t row_width,
                        const std::vector<RowSection>& sections) {
  int64_t rows = 0;
  for (const RowSection& s : sections) rows += s.size;
  Tensor out = row_width == 1 ? Tensor({rows}) : Tensor({rows, row_width});
  float* to = out.data();
  for (const RowSection& s : sections) {
    std::copy_n(whole.data() + (s.offset + s.begin) * row_width, s.size * row_width, to);
    to += s.size * row_width;
  }
  return out;
}

}  // namespace strata
