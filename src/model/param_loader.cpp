#include "model/param_loader.h"

#include "core/dummy_random.h"
#include "core/error.h"

namespace strata {

namespace {
constexpr float kDummyStddev = 0.02f;  // DummyWeights' matrices, as transformers initializes
}

Tensor ParamLoader::matrix(const std::vector<std::string>& prefixes, int64_t in,
                           const std::vector<int64_t>& outs) {
  STRATA_CHECK(prefixes.size() == outs.size(), "{} prefixes, {} sizes", prefixes.size(),
               outs.size());
  if (prefixes.size() == 1) return matrix(prefixes[0] + ".weight", outs[0], in);
  int64_t rows = 0;
  for (int64_t o : outs) rows += o;
  Tensor host({rows, in});
  int64_t row = 0;
  // Packed int8 matrices interleave their rows in groups, so the parts cannot be made in
  // place: they take the host path below (DummyWeights gives the same values).
  if (dummy_ && ops_.weight_dtype() != DType::Q8) {
    // Made on the device part by part, each part the values of its own name.
    Tensor out = ops_.allocate({rows, in}, ops_.weight_dtype());
    for (size_t i = 0; i < prefixes.size(); ++i) {
      Tensor part = out.slice_rows(row, outs[i]);
      ops_.fill_dummy(part, dummy_stream(seed_, prefixes[i] + ".weight"), kDummyStddev);
      row += outs[i];
    }
    placed(out.numel(), out.bytes());
    return out;
  }
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor part = source_.load(prefixes[i] + ".weight", {outs[i], in});
    std::copy(part.data(), part.data() + part.numel(), host.row(row));
    row += outs[i];
  }
  return upload_matrix(host);
}

Tensor ParamLoader::matrix(const std::string& name, int64_t rows, int64_t cols) {
  if (dummy_) {
    Tensor out = ops_.allocate({rows, cols}, ops_.weight_dtype());
    ops_.fill_dummy(out, dummy_stream(seed_, name), kDummyStddev);
    placed(out.numel(), out.bytes());
    return out;
  }
  return upload_matrix(source_.load(name, {rows, cols}));
}

Tensor ParamLoader::matrix_f32(const std::string& name, int64_t rows, int64_t cols) {
  if (dummy_) {
    Tensor out = ops_.allocate({rows, cols}, DType::F32);
    ops_.fill_dummy(out, dummy_stream(seed_, name), kDummyStddev);
    placed(out.numel(), out.bytes());
    return out;
  }
  return upload(source_.load(name, {rows, cols}), DType::F32);
}

Tensor ParamLoader::matrix_rearranged(const std::string& name,
                                      const std::vector<int64_t>& stored_shape, int64_t rows,
                                      int64_t cols,
                                      const std::function<Tensor(const Tensor&)>& rearrange) {
  if (dummy_) return matrix(name, rows, cols);
  const Tensor out = rearrange(source_.load(name, stored_shape));
  STRATA_CHECK(out.ndim() == 2 && out.dim(0) == rows && out.dim(1) == cols,
               "{} rearranged to {}, expected [{}, {}]", name, out.shape_str(), rows, cols);
  return upload_matrix(out);
}

Tensor ParamLoader::vector(const std::string& name, int64_t n) {
  return upload(source_.load(name, {n}), DType::F32);
}

Tensor ParamLoader::biases(const std::vector<std::string>& prefixes,
                           const std::vector<int64_t>& outs, bool present) {
  if (!present) return {};
  int64_t total = 0;
  for (int64_t o : outs) total += o;
  Tensor host({total});
  int64_t at = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor part = source_.load(prefixes[i] + ".bias", {outs[i]});
    std::copy(part.data(), part.data() + outs[i], host.data() + at);
    at += outs[i];
  }
  return upload(host, DType::F32);
}

}  // namespace strata
