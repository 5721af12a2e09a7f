#include "model/param_loader.h"

#include "core/dummy_random.h"
#include "core/error.h"

namespace strata {

namespace {
constexpr float kDummyStddev = 0.02f;  // DummyWeights' matrices, as transformers initializes
}

Tensor ParamLoader::matrix(const std::vector<std::string>& prefixes, int64_t in,
                           const std::vector<int64_t>& outs) {
  return matrix_rows(prefixes, in, outs, std::vector<Shard>(prefixes.size()));
}

Tensor ParamLoader::matrix_rows(const std::vector<std::string>& prefixes, int64_t in,
                                const std::vector<int64_t>& outs,
                                const std::vector<Shard>& shards) {
  STRATA_CHECK(prefixes.size() == outs.size() && shards.size() == outs.size(),
               "{} prefixes, {} sizes, {} shards", prefixes.size(), outs.size(), shards.size());
  if (prefixes.size() == 1 && shards[0].whole())
    return matrix(prefixes[0] + ".weight", outs[0], in);
  int64_t rows = 0;
  for (size_t i = 0; i < outs.size(); ++i) rows += shards[i].size(outs[i]);
  int64_t row = 0;
  // Packed int8 matrices interleave their rows in groups, so the parts cannot be made in
  // place: they take the host path below (DummyWeights gives the same values).
  if (dummy_ && ops_.weight_dtype() != DType::Q8) {
    // Made on the device part by part, each part the values of its own name (a shard's values
    // are its own, not the same rows of the whole: random either way).
    Tensor out = ops_.allocate({rows, in}, ops_.weight_dtype());
    for (size_t i = 0; i < prefixes.size(); ++i) {
      Tensor part = out.slice_rows(row, shards[i].size(outs[i]));
      ops_.fill_dummy(part, dummy_stream(seed_, prefixes[i] + ".weight"), kDummyStddev);
      row += shards[i].size(outs[i]);
    }
    placed(out.numel(), out.bytes());
    return out;
  }
  Tensor host({rows, in});
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor part = source_.load(prefixes[i] + ".weight", {outs[i], in});
    const int64_t n = shards[i].size(outs[i]);
    const float* from = part.row(shards[i].begin(outs[i]));
    std::copy(from, from + n * in, host.row(row));
    row += n;
  }
  return upload_matrix(host);
}

Tensor ParamLoader::matrix_cols(const std::vector<std::string>& names, int64_t rows, int64_t cols,
                                const Shard& shard) {
  const int64_t begin = shard.begin(cols), width = shard.size(cols);
  if (shard.whole() && names.size() == 1) return matrix(names[0], rows, cols);
  const auto n = static_cast<int64_t>(names.size());
  if (dummy_ && ops_.weight_dtype() != DType::Q8) {  // int8: the host path, as above
    Tensor out = ops_.allocate({n * rows, width}, ops_.weight_dtype());
    for (int64_t i = 0; i < n; ++i) {
      Tensor part = out.slice_rows(i * rows, rows);
      ops_.fill_dummy(part, dummy_stream(seed_, names[i]), kDummyStddev);
    }
    placed(out.numel(), out.bytes());
    return out;
  }
  Tensor host({n * rows, width});
  for (int64_t i = 0; i < n; ++i) {
    const Tensor whole = source_.load(names[i], {rows, cols});
    for (int64_t r = 0; r < rows; ++r)
      std::copy(whole.row(r) + begin, whole.row(r) + begin + width, host.row(i * rows + r));
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

Tensor ParamLoader::vector(const std::string& name, int64_t n, const Shard& shard) {
  if (shard.whole()) return upload(source_.load(name, {n}), DType::F32);
  const Tensor whole = source_.load(name, {n});
  Tensor host({shard.size(n)});
  std::copy_n(whole.data() + shard.begin(n), shard.size(n), host.data());
  return upload(host, DType::F32);
}

Tensor ParamLoader::biases(const std::vector<std::string>& prefixes,
                           const std::vector<int64_t>& outs, bool present,
                           const std::vector<Shard>& shards) {
  if (!present) return {};
  auto shard_of = [&](size_t i) { return shards.empty() ? Shard{} : shards.at(i); };
  int64_t total = 0;
  for (size_t i = 0; i < outs.size(); ++i) total += shard_of(i).size(outs[i]);
  Tensor host({total});
  int64_t at = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor part = source_.load(prefixes[i] + ".bias", {outs[i]});
    const int64_t n = shard_of(i).size(outs[i]);
    std::copy_n(part.data() + shard_of(i).begin(outs[i]), n, host.data() + at);
    at += n;
  }
  return upload(host, DType::F32);
}

}  // namespace strata
