// CpuOps: the reference implementation of the ops interface. f32 throughout, on host memory;
// the kernels live in kernels/cpu (OpenBLAS sgemm and a skinny decode GEMM, OpenMP loops).
// Weight matrices may instead be kept in bf16 (--dtype bfloat16): half the bytes a decode step
// streams; they are widened to f32 as they are read, so activations and sums stay f32. Or in
// int8 with a scale per row and 64 columns (--quantization int8, DType::Q8: kernels/cpu/
// int8_weights.h), quantized as they are put here; the activations a product reads are
// quantized on the fly, its outputs are f32.
// Strided inputs are copied to contiguous scratch where a kernel wants rows back to back.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dummy_random.h"
#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_weights.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/routing_rope.h"
#include "kernels/gated_activation_math.h"
#include "ops/cpu_recurrent_ops.h"
#include "ops/logit_edits.h"
#include "ops/logprobs.h"
#include "ops/ops.h"
#include "ops/sampling.h"
#include "ops/token_masks.h"

namespace strata {

namespace {

void check_host_f32(const Tensor& t, const char* what) {
  STRATA_CHECK(t.on_host() && t.dtype() == DType::F32, "cpu op {}: a {} tensor", what,
               t.describe());
}

// The dtypes CpuOps keeps weight matrices in.
bool cpu_weight_dtype(DType d) {
  return d == DType::F32 || d == DType::BF16 || d == DType::Q8;
}

void check_host_weight(const Tensor& w, const char* what) {
  STRATA_CHECK(w.on_host() && cpu_weight_dtype(w.dtype()), "cpu op {}: a {} weight", what,
               w.describe());
}

// y[m, n] = x[m, k] . W^T (+ bias) for rows [row0, row0 + n) of the weight w (k columns).
void weight_linear(const float* x, int64_t m, int64_t k, const Tensor& w, int64_t row0, int64_t n,
                   const float* bias, float* y) {
  if (w.dtype() == DType::Q8)
    cpu::linear_int8(x, m, k, w.ptr<uint8_t>(), row0, n, bias, y);
  else if (w.dtype() == DType::BF16)
    cpu::linear_bf16(x, m, k, w.ptr<uint16_t>() + row0 * k, n, bias, y);
  else
    cpu::linear(x, m, k, w.ptr<float>() + row0 * k, n, bias, y);
}

// Fills the int8 matrix `out` [rows, cols] with the values row(r, values) writes (cols floats
// of row r), quantized.
template <typename RowValues>
void quantize_into(Tensor& out, RowValues row) {
  const int64_t rows = out.rows(), cols = out.cols();
  const int64_t group_bytes = cpu::int8::group_bytes(cols);
#pragma omp parallel
  {
    std::vector<float> values(static_cast<size_t>(cpu::int8::kGroupRows * cols));
#pragma omp for schedule(static)
    for (int64_t g = 0; g < cpu::int8::groups(rows); ++g) {
      const int64_t r0 = g * cpu::int8::kGroupRows;
      const int64_t count = std::min(cpu::int8::kGroupRows, rows - r0);
      for (int64_t r = 0; r < count; ++r) row(r0 + r, values.data() + r * cols);
      cpu::int8::quantize_group(values.data(), count, cols, out.ptr<uint8_t>() + g * group_bytes);
    }
  }
}

// x as a contiguous host f32 tensor (itself when it already is one).
Tensor contiguous(const Tensor& x) {
  check_host_f32(x, "input");
  return x.contiguous() ? x : x.clone();
}

// Writes contiguous `src` into the (possibly strided) rows of dst.
void write_rows(const Tensor& src, Tensor& dst) {
  if (src.raw() == dst.raw()) return;
  const int64_t cols = dst.cols();
  for (int64_t r = 0; r < dst.rows(); ++r)
    std::memcpy(dst.ptr<float>() + r * dst.row_stride(), src.ptr<float>() + r * cols,
                sizeof(float) * cols);
}

float apply(Activation act, float x) {
  switch (act) {
    case Activation::Silu:
      return cpu::silu(x);
    case Activation::Gelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::GeluTanh: {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
    case Activation::Relu2:
      return x > 0.0f ? x * x : 0.0f;
    case Activation::ClampedSwiglu:  // gated only (gated_value)
      break;
  }
  return x;
}

float gated_value(Activation act, float gate, float up) {
  return act == Activation::ClampedSwiglu ? clamped_swiglu(gate, up) : apply(act, gate) * up;
}

class CpuOps : public Ops {
 public:
  explicit CpuOps(DType weight_dtype) : weight_dtype_(weight_dtype) {
    STRATA_CHECK(cpu_weight_dtype(weight_dtype), "the CPU keeps weights in f32, bf16 or Q8, not {}",
                 dtype_name(weight_dtype));
  }
  Device device() const override { return Device::host(); }
  DType weight_dtype() const override { return weight_dtype_; }
  DType activation_dtype() const override { return DType::F32; }

  Tensor empty(std::vector<int64_t> shape, DType dtype) override {
    return Tensor(std::move(shape), dtype);
  }
  Tensor allocate(std::vector<int64_t> shape, DType dtype) override {
    return Tensor(std::move(shape), dtype);  // zero-filled
  }
  Tensor upload(const Tensor& host, DType dtype) override {
    check_host_f32(host, "upload");
    STRATA_CHECK(cpu_weight_dtype(dtype), "the CPU keeps weights in f32, bf16 or Q8, asked for {}",
                 dtype_name(dtype));
    if (dtype == DType::F32) return host;  // already where it belongs: shared, not copied
    const Tensor src = contiguous(host);
    if (dtype == DType::Q8) {
      STRATA_CHECK(src.ndim() == 2, "int8 weights are matrices, not {}", src.describe());
      Tensor out(src.shape(), DType::Q8);
      quantize_into(out, [&](int64_t r, float* values) {
        std::memcpy(values, src.row(r), sizeof(float) * src.cols());
      });
      return out;
    }
    Tensor out(src.shape(), DType::BF16);
    uint16_t* dst = out.ptr<uint16_t>();
    const float* from = src.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < src.numel(); ++i) dst[i] = f32_to_bf16(from[i]);
    return out;
  }
  Tensor to_host(const Tensor& t) override {
    return contiguous(t);
  }
  void copy(const Tensor& src, Tensor& dst) override {
    STRATA_CHECK(src.rows() == dst.rows() && src.cols() == dst.cols(), "copy {} -> {}",
                 src.describe(), dst.describe());
    if (src.dtype() != DType::F32 && src.dtype() == dst.dtype() && src.on_host() && dst.on_host()) {
      // Same-dtype rows (a bf16 recurrent state between pool slots): bytes as they are.
      const size_t row_bytes = static_cast<size_t>(src.cols()) * dtype_size(src.dtype());
      for (int64_t r = 0; r < src.rows(); ++r)
        std::memmove(
            static_cast<char*>(dst.raw()) + r * dst.row_stride() * dtype_size(dst.dtype()),
            static_cast<const char*>(src.raw()) + r * src.row_stride() * dtype_size(src.dtype()),
            row_bytes);
      return;
    }
    check_host_f32(src, "copy");
    check_host_f32(dst, "copy");
    write_rows(contiguous(src), dst);
  }
  void fill(Tensor& t, float value) override {
    if (t.dtype() == DType::BF16 && t.on_host()) {  // a bf16 recurrent state being zeroed
      for (int64_t r = 0; r < t.rows(); ++r)
        std::fill_n(t.ptr<uint16_t>() + r * t.row_stride(), t.cols(), f32_to_bf16(value));
      return;
    }
    check_host_f32(t, "fill");
    for (int64_t r = 0; r < t.rows(); ++r)
      std::fill_n(t.ptr<float>() + r * t.row_stride(), t.cols(), value);
  }
  void fill_dummy(Tensor& t, uint64_t stream, float stddev) override {
    STRATA_CHECK(t.contiguous(), "fill_dummy of a strided tensor");
    if (t.dtype() == DType::Q8) {  // int8 weights: the f32 values, quantized
      const int64_t cols = t.cols();
      quantize_into(t, [&](int64_t r, float* values) {
        for (int64_t c = 0; c < cols; ++c) values[c] = dummy_value(stream, r * cols + c, stddev);
      });
      return;
    }
    if (t.dtype() == DType::BF16 && t.on_host()) {  // bf16 weights: the f32 values, rounded
      uint16_t* p = t.ptr<uint16_t>();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = f32_to_bf16(dummy_value(stream, i, stddev));
      return;
    }
    check_host_f32(t, "fill_dummy");
    float* p = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dummy_value(stream, i, stddev);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
              bool accumulate) override {
    check_host_weight(w, "linear");
    check_host_f32(y, "linear output");
    STRATA_CHECK(x.cols() == w.dim(1) && y.cols() == w.dim(0) && y.rows() == x.rows(),
                 "linear {} x {}^T -> {}", x.describe(), w.describe(), y.describe());
    const Tensor xc = contiguous(x);
    const int64_t rows = x.rows(), in = w.dim(1), out = w.dim(0);
    const float* b = bias && !bias->empty() ? bias->data() : nullptr;
    if (!accumulate && y.contiguous()) {
      weight_linear(xc.data(), rows, in, w, 0, out, b, y.ptr<float>());
      return;
    }
    Tensor tmp({rows, out});
    weight_linear(xc.data(), rows, in, w, 0, out, b, tmp.data());
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = y.ptr<float>() + r * y.row_stride();
      const float* src = tmp.row(r);
      if (accumulate)
        cpu::add_inplace(dst, src, out);
      else
        std::memcpy(dst, src, sizeof(float) * out);
    }
  }

  void head_linear(const Tensor& x, const Tensor& w, int heads, Tensor& y) override {
    check_host_weight(w, "head_linear");
    const int64_t k = x.cols() / heads, n = w.dim(0) / heads, rows = x.rows();
    STRATA_CHECK(x.cols() == k * heads && w.dim(1) == k && y.cols() == n * heads,
                 "head_linear {} over {} heads of {} -> {}", x.describe(), heads, w.describe(),
                 y.describe());
    const Tensor xc = contiguous(x);
    std::vector<float> xh(rows * k), yh(rows * n);
    for (int h = 0; h < heads; ++h) {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(xh.data() + r * k, xc.data() + r * xc.cols() + h * k, sizeof(float) * k);
      weight_linear(xh.data(), rows, k, w, h * n, n, nullptr, yh.data());
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(y.ptr<float>() + r * y.row_stride() + h * n, yh.data() + r * n,
                    sizeof(float) * n);
    }
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                Tensor& out) override {
    check_host_f32(x, "rms_norm");
    check_host_f32(out, "rms_norm output");
    const int64_t width = w.numel();
    STRATA_CHECK(
        width > 0 && x.cols() % width == 0 && out.cols() == x.cols() && out.rows() == x.rows(),
        "rms_norm of {} in groups of {} -> {}", x.describe(), width, out.describe());
    const int64_t groups = x.cols() / width;
    if (x.contiguous() && out.contiguous()) {
      cpu::rms_norm(x.ptr<float>(), w.data(), x.rows() * groups, width, eps, out.ptr<float>(),
                    weight_offset);
      return;
    }
    for (int64_t r = 0; r < x.rows(); ++r)
      cpu::rms_norm(x.ptr<float>() + r * x.row_stride(), w.data(), groups, width, eps,
                    out.ptr<float>() + r * out.row_stride(), weight_offset);
  }

  void add(Tensor& x, const Tensor& y) override {
    check_host_f32(x, "add");
    check_host_f32(y, "add");
    STRATA_CHECK(x.rows() == y.rows() && x.cols() == y.cols(),
                 "residual add of {} and {}: shapes differ", x.describe(), y.describe());
    for (int64_t r = 0; r < x.rows(); ++r)
      cpu::add_inplace(x.ptr<float>() + r * x.row_stride(), y.ptr<float>() + r * y.row_stride(),
                       x.cols());
  }

  void mul(const Tensor& a, const Tensor& b, bool sigmoid_b, Tensor& out) override {
    check_host_f32(a, "mul");
    check_host_f32(b, "mul");
    check_host_f32(out, "mul output");
    STRATA_CHECK(a.rows() == b.rows() && (b.cols() == a.cols() || b.cols() == 1) &&
                     out.rows() == a.rows() && out.cols() == a.cols(),
                 "elementwise product of {} and {} into {}: shapes differ", a.describe(),
                 b.describe(), out.describe());
    const bool per_row = b.cols() == 1;
    for (int64_t r = 0; r < a.rows(); ++r) {
      const float* pa = a.ptr<float>() + r * a.row_stride();
      const float* pb = b.ptr<float>() + r * b.row_stride();
      float* po = out.ptr<float>() + r * out.row_stride();
      for (int64_t i = 0; i < a.cols(); ++i) {
        const float f = pb[per_row ? 0 : i];
        po[i] = pa[i] * (sigmoid_b ? 1.0f / (1.0f + std::exp(-f)) : f);
      }
    }
  }

  void scale(Tensor& x, float s) override {
    check_host_f32(x, "scale");
    for (int64_t r = 0; r < x.rows(); ++r) {
      float* p = x.ptr<float>() + r * x.row_stride();
      for (int64_t i = 0; i < x.cols(); ++i) p[i] *= s;
    }
  }

  void scale_columns(Tensor& x, const Tensor& scale) override {
    check_host_f32(x, "scale_columns");
    check_host_f32(scale, "scale_columns multipliers");
    STRATA_CHECK(scale.numel() == x.cols(), "scale_columns {} by {}", x.describe(),
                 scale.describe());
    for (int64_t r = 0; r < x.rows(); ++r) {
      float* p = x.ptr<float>() + r * x.row_stride();
      for (int64_t i = 0; i < x.cols(); ++i) p[i] *= scale.ptr<float>()[i];
    }
  }

  void causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, bool silu,
                     const Tensor& seqs, Tensor& conv_states, Tensor& out) override {
    cpu_ops::causal_conv1d(x, weight, bias, silu, seqs, conv_states, out);
  }
  void ssm_scan(const Tensor& xbc, const Tensor& dt, const SsmParams& p, const Tensor& seqs,
                bool decode, Tensor& states, Tensor& y) override {
    cpu_ops::ssm_scan(xbc, dt, p, seqs, decode, states, y);
  }
  void gated_delta_rule(const Tensor& qkv, const Tensor& b, const Tensor& a,
                        const DeltaNetParams& p, const Tensor& seqs, bool decode, Tensor& states,
                        Tensor& y) override {
    cpu_ops::gated_delta_rule(qkv, b, a, p, seqs, decode, states, y);
  }
  void gated_rms_norm(const Tensor& y, const Tensor& z, const Tensor* weight, int groups, float eps,
                      bool norm_before_gate, Tensor& out, SpanningGroups spanning) override {
    cpu_ops::gated_rms_norm(y, z, weight, groups, eps, norm_before_gate, out, spanning);
  }
  void gated_sum_squares(const Tensor& y, const Tensor& z, int groups, bool norm_before_gate,
                         Tensor& sums) override {
    cpu_ops::gated_sum_squares(y, z, groups, norm_before_gate, sums);
  }

  void gated_activation(const Tensor& gate_up, Activation act, Tensor& out) override {
    const Tensor g = contiguous(gate_up);
    check_host_f32(out, "gated_activation output");
    const int64_t width = out.cols(), rows = out.rows();
    STRATA_CHECK(g.cols() == 2 * width && g.rows() == rows && out.contiguous(),
                 "gated activation {} -> {}", gate_up.describe(), out.describe());
    if (act == Activation::Silu) return cpu::silu_and_mul(g.data(), rows, width, out.data());
    if (act == Activation::GeluTanh)
      return cpu::gelu_tanh_and_mul(g.data(), rows, width, out.data());
#pragma omp parallel for if (rows > 16)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < width; ++i)
        out.data()[r * width + i] =
            gated_value(act, g.data()[r * 2 * width + i], g.data()[r * 2 * width + width + i]);
  }

  void activation(const Tensor& x, Activation act, Tensor& out) override {
    check_host_f32(x, "activation");
    check_host_f32(out, "activation output");
    STRATA_CHECK(x.rows() == out.rows() && x.cols() == out.cols(), "activation {} -> {}",
                 x.describe(), out.describe());
    STRATA_CHECK(act != Activation::ClampedSwiglu, "the clamped SwiGLU is a gated activation");
    for (int64_t r = 0; r < x.rows(); ++r) {
      const float* a = x.ptr<float>() + r * x.row_stride();
      float* o = out.ptr<float>() + r * out.row_stride();
      for (int64_t i = 0; i < x.cols(); ++i) o[i] = apply(act, a[i]);
    }
  }

  void rope(Tensor& x, int num_heads, int64_t head_stride, const Tensor& positions,
            const RopeTable& rope) override {
    check_host_f32(x, "rope");
    STRATA_CHECK(positions.numel() == x.rows(), "rope: {} positions for {} rows", positions.numel(),
                 x.rows());
    cpu::rope(x.ptr<float>(), x.rows(), num_heads, x.row_stride(), head_stride,
              positions.ptr<int32_t>(), rope.inv_freq.data(), rope.rotary_dim, rope.interleaved,
              rope.cos_sin_scale);
  }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    check_host_weight(table, "embedding");
    const int64_t width = table.dim(1), vocab = table.dim(0);
    const int32_t* id = ids.ptr<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      STRATA_CHECK(id[i] >= 0 && id[i] < vocab, "token id {} outside vocabulary {}", id[i], vocab);
      float* dst = out.ptr<float>() + i * out.row_stride();
      if (table.dtype() == DType::Q8) {
        cpu::int8::dequantize_row(table.ptr<uint8_t>(), width, id[i], dst);
      } else if (table.dtype() == DType::BF16) {
        const uint16_t* row = table.ptr<uint16_t>() + int64_t{id[i]} * width;
        for (int64_t d = 0; d < width; ++d) dst[d] = bf16_to_f32(row[d]);
      } else {
        std::memcpy(dst, table.row(id[i]), sizeof(float) * width);
      }
    }
  }

  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    check_host_f32(x, "gather_rows");
    const int32_t* r = rows.ptr<int32_t>();
    for (int64_t i = 0; i < rows.numel(); ++i)
      std::memcpy(out.ptr<float>() + i * out.row_stride(),
                  x.ptr<float>() + int64_t{r[i]} * x.row_stride(), sizeof(float) * x.cols());
  }

  void route(const RouterConfig& cfg, const Tensor& router_logits, const Tensor* bias, Tensor& ids,
             Tensor& weights) override {
    const Tensor logits = contiguous(router_logits);
    cpu::route_tokens(cfg, logits.data(), logits.rows(),
                      bias && !bias->empty() ? bias->data() : nullptr, ids.ptr<int32_t>(),
                      weights.ptr<float>());
  }

  void experts(const ExpertWeights& w, const Tensor& x, const Tensor& ids, const Tensor& weights,
               Tensor& out) override {
    const Tensor xc = contiguous(x);
    const int64_t t = xc.rows(), hidden = w.hidden, inter = w.intermediate;
    const int64_t k = ids.cols(), in_rows = (w.gated ? 2 : 1) * inter;
    // Group the (token, slot) pairs by expert so each expert runs one GEMM over its tokens.
    std::vector<std::vector<int64_t>> assigned(w.num_experts);
    for (int64_t i = 0; i < t * k; ++i) assigned[ids.ptr<int32_t>()[i]].push_back(i);
    std::vector<float> in_rows_buf, h, act, out_rows;
    for (int e = 0; e < w.num_experts; ++e) {
      const auto& pairs = assigned[e];
      if (pairs.empty()) continue;
      const int64_t n = static_cast<int64_t>(pairs.size());
      in_rows_buf.resize(n * hidden);
      h.resize(n * in_rows);
      act.resize(n * inter);
      out_rows.resize(n * hidden);
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(in_rows_buf.data() + j * hidden, xc.row(pairs[j] / k), sizeof(float) * hidden);
      const float* b_in = w.b_in.empty() ? nullptr : w.b_in.data() + e * in_rows;
      const float* b_down = w.b_down.empty() ? nullptr : w.b_down.data() + e * hidden;
      weight_linear(in_rows_buf.data(), n, hidden, w.w_in, e * in_rows, in_rows, b_in, h.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inter; ++i) {
          const float g = h[j * in_rows + i];
          act[j * inter + i] = w.gated ? gated_value(w.activation, g, h[j * in_rows + inter + i])
                                       : apply(w.activation, g);
        }
      weight_linear(act.data(), n, inter, w.w_down, e * hidden, hidden, b_down, out_rows.data());
      for (int64_t j = 0; j < n; ++j) {
        float* o = out.ptr<float>() + (pairs[j] / k) * out.row_stride();
        const float wgt = weights.ptr<float>()[pairs[j]];
        for (int64_t d = 0; d < hidden; ++d) o[d] += wgt * out_rows[j * hidden + d];
      }
    }
  }

  void argmax(const Tensor& logits, Tensor& ids) override {
    check_host_f32(logits, "argmax");
    for (int64_t r = 0; r < logits.rows(); ++r) {
      const float* row = logits.ptr<float>() + r * logits.row_stride();
      ids.ptr<int32_t>()[r] =
          static_cast<int32_t>(std::max_element(row, row + logits.cols()) - row);
    }
  }

  void sample(const Tensor& logits, const Tensor& rows, Tensor& ids) override {
    check_host_f32(logits, "sample");
    STRATA_CHECK(rows.dtype() == DType::I32 && rows.numel() == logits.rows() * kSamplingRowInts &&
                     ids.numel() == logits.rows(),
                 "sample of {} with rows {} into {}", logits.describe(), rows.describe(),
                 ids.describe());
    for (int64_t r = 0; r < logits.rows(); ++r) {
      const SamplingRow row = SamplingRow::unpack(rows.ptr<int32_t>() + r * kSamplingRowInts);
      ids.ptr<int32_t>()[r] = sample_row(logits.ptr<float>() + r * logits.row_stride(),
                                         static_cast<int>(logits.cols()), row);
    }
  }

  void edit_logits(Tensor& logits, const Tensor& edits) override {
    check_host_f32(logits, "edit_logits");
    STRATA_CHECK(edits.dtype() == DType::I32 && edits.numel() % kLogitEditInts == 0,
                 "logit edits {}", edits.describe());
    apply_logit_edits(logits.ptr<float>(), logits.row_stride(), logits.rows(), logits.cols(),
                      edits.ptr<int32_t>(), edits.numel() / kLogitEditInts);
  }

  void mask_logits(Tensor& logits, const Tensor& rows, const Tensor& masks) override {
    check_host_f32(logits, "mask_logits");
    STRATA_CHECK(rows.dtype() == DType::I32 && masks.dtype() == DType::I32 &&
                     masks.numel() == rows.numel() * 2 * token_mask_words(logits.cols()),
                 "token masks {} for rows {} of {}", masks.describe(), rows.describe(),
                 logits.describe());
    apply_token_masks(logits.ptr<float>(), logits.row_stride(), logits.rows(), logits.cols(),
                      rows.ptr<int32_t>(), masks.ptr<int32_t>(), rows.numel());
  }

  void logprobs(const Tensor& logits, const Tensor& ids, int top_n, Tensor& out) override {
    check_host_f32(logits, "logprobs");
    STRATA_CHECK(ids.dtype() == DType::I32 && ids.numel() == logits.rows() &&
                     out.dtype() == DType::F32 && out.contiguous() &&
                     out.numel() == logits.rows() * logprob_row_width(top_n),
                 "logprobs of {} at {} into {}", logits.describe(), ids.describe(), out.describe());
    for (int64_t r = 0; r < logits.rows(); ++r)
      row_logprobs(logits.ptr<float>() + r * logits.row_stride(), static_cast<int>(logits.cols()),
                   ids.ptr<int32_t>()[r], top_n, out.ptr<float>() + r * logprob_row_width(top_n));
  }

 private:
  DType weight_dtype_;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops(DType weight_dtype) {
  return std::make_unique<CpuOps>(weight_dtype);
}

}  // namespace strata
