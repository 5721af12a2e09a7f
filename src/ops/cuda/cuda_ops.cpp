#include "ops/cuda/cuda_ops.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/tensor_ops.h"
#include "ops/cuda/cuda_op_checks.h"

namespace strata {

using cuda_op::act_of;
using cuda_op::is_float;
using cuda_op::view;

namespace {

constexpr size_t kAlign = 256;                     // every arena tensor starts on a 256-byte line
constexpr size_t kArenaGranule = size_t{2} << 20;  // the arena grows in 2 MiB steps

size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols();
}

}  // namespace

// First fit over the arena's free blocks, lowest address first: deterministic, so the same
// sequence of requests and releases gives the same offsets (what graph capture relies on).
struct CudaOps::ArenaBlocks {
  std::map<size_t, size_t> free;  // offset -> bytes, coalesced
  uint64_t epoch = 0;             // bumped by every reset: releases from older passes are void
  size_t peak = 0;                // highest end offset in use during this pass

  void reset(size_t capacity) {
    free.clear();
    if (capacity > 0) free[0] = capacity;
    ++epoch;
    peak = 0;
  }
  std::optional<size_t> take(size_t bytes) {
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes) continue;
      const size_t off = it->first, left = it->second - bytes;
      free.erase(it);
      if (left > 0) free[off + bytes] = left;
      peak = std::max(peak, off + bytes);
      return off;
    }
    return std::nullopt;
  }
  void give(size_t off, size_t bytes) {
    auto next = free.lower_bound(off);
    if (next != free.end() && off + bytes == next->first) {
      bytes += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += bytes;
        return;
      }
    }
    free[off] = bytes;
  }
};

CudaOps::CudaOps(int gpu_id, cudaStream_t stream, size_t arena_bytes)
    : gpu_(gpu_id), stream_(stream), blocks_(std::make_shared<ArenaBlocks>()) {
  STRATA_CUDA_CHECK(cudaSetDevice(gpu_id));
  blas_ = std::make_unique<cuda::Blas>(stream);
  if (arena_bytes > 0) {
    capacity_ = align_up(arena_bytes, kArenaGranule);
    arena_ = device_alloc(capacity_, "the workspace arena");
  }
}

CudaOps::~CudaOps() {
  cudaStreamSynchronize(stream_);  // no throwing from a destructor: errors are ignored here
  if (arena_) cudaFree(arena_);
}

bool CudaOps::capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  STRATA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  return status != cudaStreamCaptureStatusNone;
}

void* CudaOps::device_alloc(size_t bytes, const char* what) {
  if (capturing())
    fail(
        "CudaOps on cuda:{}: {} needs {} bytes of new device memory while the stream is being "
        "captured into a CUDA graph; run this shape uncaptured first (the arena grows to fit at "
        "the next begin_pass)",
        gpu_, what, bytes);
  void* p = nullptr;
  STRATA_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, kAlign)));
  return p;
}

// Replaces the arena by one of at least `bytes` (every arena address changes: generation + 1).
void CudaOps::regrow(size_t bytes) {
  STRATA_CHECK(!capturing(), "the workspace arena cannot grow while the stream is captured");
  // Kernels queued earlier may still read the old arena.
  STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (arena_) STRATA_CUDA_CHECK(cudaFree(arena_));
  arena_ = nullptr;
  capacity_ = align_up(bytes, kArenaGranule);
  arena_ = device_alloc(capacity_, "the workspace arena");
  ++generation_;
  grew_ = true;
}

void CudaOps::begin_pass() {
  grew_ = false;
  // The previous pass's need (arena peak plus the most it spilled past the arena).
  if (pass_bytes_ > capacity_) regrow(pass_bytes_);
  offset_ = 0;
  pass_bytes_ = 0;
  overflow_bytes_ = overflow_peak_ = 0;
  blocks_->reset(capacity_);
  in_pass_ = true;
}

void CudaOps::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  STRATA_CHECK(!in_pass_ || offset_ == 0, "reserve() in the middle of a pass");
  regrow(bytes);
  blocks_->reset(capacity_);
}

Tensor CudaOps::allocate(std::vector<int64_t> shape, DType dtype) {
  const Tensor probe = Tensor::view(nullptr, shape, dtype, device());
  void* p = device_alloc(probe.bytes(), "a persistent tensor");
  std::shared_ptr<void> owner(p, [](void* q) { cudaFree(q); });
  if (probe.bytes() > 0) STRATA_CUDA_CHECK(cudaMemsetAsync(p, 0, probe.bytes(), stream_));
  return Tensor::view(p, std::move(shape), dtype, device(), std::move(owner));
}

Tensor CudaOps::empty(std::vector<int64_t> shape, DType dtype) {
  if (!in_pass_) return allocate(std::move(shape), dtype);
  const size_t bytes =
      align_up(std::max<size_t>(Tensor::view(nullptr, shape, dtype, device()).bytes(), 1), kAlign);
  void* p;
  std::shared_ptr<void> owner;
  if (const auto off = blocks_->take(bytes)) {
    p = static_cast<char*>(arena_) + *off;
    // The block goes back when the last view of this tensor dies (in this pass only).
    owner = std::shared_ptr<void>(p, [w = std::weak_ptr<ArenaBlocks>(blocks_),
                                      epoch = blocks_->epoch, off = *off, bytes](void*) {
      if (auto b = w.lock(); b && b->epoch == epoch) b->give(off, bytes);
    });
  } else {
    // Past the arena: a stream-ordered allocation, given back (stream-ordered too) when the
    // tensor dies, so that a pass that outgrows the arena still reuses its layers' scratch.
    if (capturing())
      fail(
          "CudaOps on cuda:{}: workspace past the arena needs {} bytes while the stream is being "
          "captured into a CUDA graph; run this shape uncaptured first (the arena grows to fit "
          "at the next begin_pass)",
          gpu_, bytes);
    STRATA_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream_));
    overflow_bytes_ += bytes;
    overflow_peak_ = std::max(overflow_peak_, overflow_bytes_);
    owner = std::shared_ptr<void>(p, [w = std::weak_ptr<ArenaBlocks>(blocks_), this, bytes,
                                      epoch = blocks_->epoch, stream = stream_](void* q) {
      cudaFreeAsync(q, stream);  // no throwing from a deleter: an error shows at the next call
      // `this` lives while blocks_ does; only this pass's spill counts towards its need.
      if (auto b = w.lock(); b && b->epoch == epoch) overflow_bytes_ -= bytes;
    });
  }
  // What an arena without overflow would have needed: its peak plus the most that spilled.
  pass_bytes_ = std::max(pass_bytes_, blocks_->peak + overflow_peak_);
  high_water_ = std::max(high_water_, pass_bytes_);
  return Tensor::view(p, std::move(shape), dtype, device(), std::move(owner));
}

Tensor CudaOps::upload(const Tensor& host, DType dtype) {
  STRATA_CHECK(host.on_host(), "upload of {}: not a host tensor", host.describe());
  const Tensor src = host.contiguous() ? host : host.clone();
  const int64_t n = src.numel();
  std::vector<uint16_t> converted;
  const void* bytes = src.raw();
  if (src.dtype() != dtype) {
    STRATA_CHECK(src.dtype() == DType::F32 && dtype == DType::BF16, "upload {} as {}",
                 host.describe(), dtype_name(dtype));
    converted.resize(n);
    const float* f = static_cast<const float*>(src.raw());
    for (int64_t i = 0; i < n; ++i) converted[i] = f32_to_bf16(f[i]);
    bytes = converted.data();
  }
  const Tensor probe = Tensor::view(nullptr, host.shape(), dtype, device());
  void* p = device_alloc(probe.bytes(), "an uploaded tensor");
  std::shared_ptr<void> owner(p, [](void* q) { cudaFree(q); });
  if (n > 0) {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(p, bytes, probe.bytes(), cudaMemcpyHostToDevice, stream_));
    // The host bytes (possibly `converted`) must outlive the copy.
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  return Tensor::view(p, host.shape(), dtype, device(), std::move(owner));
}

void CudaOps::write(const Tensor& src, Tensor& dst) {
  STRATA_CHECK(
      src.on_host() && dst.device() == device() && same_view(src, dst) &&
          (src.dtype() == dst.dtype() || (src.dtype() == DType::F32 && dst.dtype() == DType::BF16)),
      "write {} into {}", src.describe(), dst.describe());
  STRATA_CHECK(!capturing(), "write of {} into {} while the stream is being captured",
               src.describe(), dst.describe());
  const Tensor c = src.contiguous() ? src : src.clone();
  const int64_t rows = c.rows(), cols = c.cols();
  if (rows * cols == 0) return;
  std::vector<uint16_t> converted;
  const void* bytes = c.raw();
  if (c.dtype() != dst.dtype()) {
    converted.resize(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) converted[i] = f32_to_bf16(c.ptr<float>()[i]);
    bytes = converted.data();
  }
  const size_t es = dtype_size(dst.dtype());
  // From pageable memory the copy returns once the source is staged: `converted` may go.
  STRATA_CUDA_CHECK(cudaMemcpy2DAsync(dst.raw(), dst.row_stride() * es, bytes, cols * es, cols * es,
                                      rows, cudaMemcpyHostToDevice, stream_));
}

Tensor CudaOps::to_host(const Tensor& t) {
  if (t.on_host()) return t.contiguous() ? t : t.clone();
  STRATA_CHECK(t.device() == device(), "to_host of {} through the ops of {}", t.describe(),
               device().str());
  const size_t es = dtype_size(t.dtype());
  const int64_t rows = t.rows(), cols = t.cols();
  std::vector<unsigned char> staging(static_cast<size_t>(rows * cols) * es);
  if (rows * cols > 0) {
    STRATA_CUDA_CHECK(cudaMemcpy2DAsync(staging.data(), cols * es, t.raw(), t.row_stride() * es,
                                        cols * es, rows, cudaMemcpyDeviceToHost, stream_));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  if (t.dtype() == DType::I32) {
    Tensor out(t.shape(), DType::I32);
    if (!staging.empty()) std::memcpy(out.raw(), staging.data(), staging.size());
    return out;
  }
  Tensor out(t.shape());
  convert_to_f32(t.dtype(), staging.data(), out.data(), static_cast<size_t>(rows * cols));
  return out;
}

Tensor CudaOps::as_bf16(const Tensor& x) {
  if (x.dtype() == DType::BF16) return x;
  Tensor xb = empty({x.rows(), x.cols()}, DType::BF16);
  copy(x, xb);
  return xb;
}

void CudaOps::copy(const Tensor& src, Tensor& dst) {
  STRATA_CHECK(
      src.device() == device() && dst.device() == device() && same_view(src, dst) &&
          (src.dtype() == dst.dtype() || (is_float(src.dtype()) && is_float(dst.dtype()))) &&
          dtype_size(src.dtype()) >= 2 && dtype_size(src.dtype()) <= 4,
      "copy {} -> {}", src.describe(), dst.describe());
  cuda::copy_2d(view(src), view(dst), src.rows(), src.cols(), stream_);
}

void CudaOps::fill(Tensor& t, float value) {
  STRATA_CHECK(t.device() == device() && (is_float(t.dtype()) || t.dtype() == DType::I32),
               "fill of {}", t.describe());
  cuda::fill_2d(view(t), t.rows(), t.cols(), value, stream_);
}

void CudaOps::fill_dummy(Tensor& t, uint64_t stream, float stddev) {
  STRATA_CHECK_DEVICE(t, "fill_dummy");
  STRATA_CHECK(t.contiguous(), "fill_dummy of a strided {}", t.describe());
  cuda::fill_dummy(t.raw(), t.dtype(), t.numel(), stream, stddev, stream_);
}

void CudaOps::linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                     bool accumulate) {
  STRATA_CHECK_DEVICE(x, "linear input");
  STRATA_CHECK_DEVICE(y, "linear output");
  STRATA_CHECK(w.device() == device() && is_float(w.dtype()) && w.ndim() == 2 && w.contiguous(),
               "linear weight {}: wants a contiguous bf16 or f32 matrix on {}", w.describe(),
               device().str());
  STRATA_CHECK(x.cols() == w.dim(1) && y.cols() == w.dim(0) && y.rows() == x.rows(),
               "linear {} x {}^T -> {}", x.describe(), w.describe(), y.describe());
  if (x.rows() == 0) return;
  if (w.dtype() == DType::F32) {  // a matrix kept in f32 (routers): f32 in, f32 out
    STRATA_CHECK(y.dtype() == DType::F32, "f32 linear into {}", y.describe());
    Tensor xf = x;
    if (x.dtype() != DType::F32) {
      xf = empty({x.rows(), x.cols()}, DType::F32);
      copy(x, xf);
    }
    blas_->gemm_f32(xf.ptr<float>(), xf.row_stride(), x.rows(), w.dim(1), w.ptr<float>(), w.dim(1),
                    w.dim(0), y.ptr<float>(), y.row_stride(), accumulate ? 1.0f : 0.0f);
  } else {
    const Tensor xb = as_bf16(x);
    blas_->gemm(xb.ptr<cuda::bf16>(), xb.row_stride(), x.rows(), w.dim(1), w.ptr<cuda::bf16>(),
                w.dim(1), w.dim(0), y.raw(), y.dtype() == DType::BF16, y.row_stride(),
                accumulate ? 1.0f : 0.0f);
  }
  if (bias && !bias->empty()) {
    STRATA_CHECK_DEVICE(*bias, "linear bias");
    STRATA_CHECK(bias->numel() == w.dim(0), "bias {} for {} outputs", bias->describe(), w.dim(0));
    cuda::add_bias_2d(view(y), bias->raw(), bias->dtype(), y.rows(), y.cols(), stream_);
  }
}

void CudaOps::head_linear(const Tensor& x, const Tensor& w, int heads, Tensor& y) {
  STRATA_CHECK_DEVICE(x, "head_linear input");
  STRATA_CHECK_DEVICE(y, "head_linear output");
  STRATA_CHECK(heads > 0 && w.device() == device() && w.dtype() == DType::BF16 && w.ndim() == 2,
               "head_linear weight {} over {} heads", w.describe(), heads);
  const int64_t k = x.cols() / heads, n = w.dim(0) / heads, rows = x.rows();
  STRATA_CHECK(x.cols() == k * heads && w.dim(0) == n * heads && w.dim(1) == k &&
                   y.cols() == n * heads && y.rows() == rows,
               "head_linear {} over {} heads of {} -> {}", x.describe(), heads, w.describe(),
               y.describe());
  if (rows == 0) return;
  const Tensor xb = as_bf16(x);
  blas_->gemm_batched(xb.ptr<cuda::bf16>(), xb.row_stride(), k, rows, k, w.ptr<cuda::bf16>(), k,
                      n * k, n, y.raw(), y.dtype() == DType::BF16, y.row_stride(), n, heads);
}

void CudaOps::rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                       Tensor& out) {
  STRATA_CHECK_DEVICE(x, "rms_norm input");
  STRATA_CHECK_DEVICE(out, "rms_norm output");
  STRATA_CHECK_DEVICE(w, "rms_norm weight");
  const int64_t width = w.numel();
  STRATA_CHECK(width > 0 && width <= INT32_MAX && x.cols() % width == 0 && out.cols() == x.cols() &&
                   out.rows() == x.rows() && w.contiguous(),
               "rms_norm of {} in groups of {} -> {}", x.describe(), width, out.describe());
  cuda::rms_norm_2d(view(x), w.raw(), w.dtype(), x.rows(), x.cols() / width,
                    static_cast<int>(width), eps, weight_offset, view(out), stream_);
}

void CudaOps::add(Tensor& x, const Tensor& y) {
  STRATA_CHECK_DEVICE(x, "add");
  STRATA_CHECK_DEVICE(y, "add");
  STRATA_CHECK(same_view(x, y), "residual add of {} and {}: shapes differ", x.describe(),
               y.describe());
  cuda::add_2d(view(x), view(y), x.rows(), x.cols(), stream_);
}

void CudaOps::mul(const Tensor& a, const Tensor& b, bool sigmoid_b, Tensor& out) {
  STRATA_CHECK_DEVICE(a, "mul");
  STRATA_CHECK_DEVICE(b, "mul");
  STRATA_CHECK_DEVICE(out, "mul output");
  STRATA_CHECK(a.rows() == b.rows() && (b.cols() == a.cols() || b.cols() == 1) && same_view(a, out),
               "elementwise product of {} and {} into {}: shapes differ", a.describe(),
               b.describe(), out.describe());
  cuda::mul_2d(view(a), view(b), b.cols() == 1, sigmoid_b, view(out), a.rows(), a.cols(), stream_);
}

void CudaOps::scale(Tensor& x, float s) {
  STRATA_CHECK_DEVICE(x, "scale");
  cuda::scale_2d(view(x), x.rows(), x.cols(), s, stream_);
}

void CudaOps::gated_activation(const Tensor& gate_up, Activation act, Tensor& out) {
  STRATA_CHECK_DEVICE(gate_up, "gated_activation input");
  STRATA_CHECK_DEVICE(out, "gated_activation output");
  STRATA_CHECK(gate_up.cols() == 2 * out.cols() && gate_up.rows() == out.rows(),
               "gated activation {} -> {}", gate_up.describe(), out.describe());
  cuda::gated_act_2d(view(gate_up), act_of(act), out.rows(), out.cols(), view(out), stream_);
}

void CudaOps::activation(const Tensor& x, Activation act, Tensor& out) {
  STRATA_CHECK_DEVICE(x, "activation input");
  STRATA_CHECK_DEVICE(out, "activation output");
  STRATA_CHECK(same_view(x, out), "activation {} -> {}", x.describe(), out.describe());
  STRATA_CHECK(act != Activation::ClampedSwiglu, "the clamped SwiGLU is a gated activation");
  cuda::act_2d(view(x), act_of(act), x.rows(), x.cols(), view(out), stream_);
}

void CudaOps::rope(Tensor& x, int num_heads, int64_t head_stride, const Tensor& positions,
                   const RopeTable& rope) {
  STRATA_CHECK_DEVICE(x, "rope");
  STRATA_CHECK_I32(positions, "rope positions");
  STRATA_CHECK(positions.numel() == x.rows(), "rope: {} positions for {} rows", positions.numel(),
               x.rows());
  STRATA_CHECK(rope.inv_freq.device() == device() && rope.inv_freq.dtype() == DType::F32 &&
                   rope.rotary_dim % 2 == 0 && rope.inv_freq.numel() == rope.rotary_dim / 2,
               "rope table {} for rotary_dim {}", rope.inv_freq.describe(), rope.rotary_dim);
  STRATA_CHECK(num_heads == 0 || (num_heads - 1) * head_stride + rope.rotary_dim <= x.cols(),
               "rope of {} heads {} apart, {} rotated, in {}", num_heads, head_stride,
               rope.rotary_dim, x.describe());
  cuda::rope_2d(view(x), x.rows(), num_heads, head_stride, positions.ptr<int32_t>(),
                rope.inv_freq.ptr<float>(), rope.rotary_dim, rope.interleaved, rope.cos_sin_scale,
                stream_);
}

void CudaOps::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  STRATA_CHECK_DEVICE(table, "embedding table");
  STRATA_CHECK_DEVICE(out, "embedding output");
  STRATA_CHECK_I32(ids, "embedding ids");
  STRATA_CHECK(table.ndim() == 2 && table.contiguous() && out.rows() == ids.numel() &&
                   out.cols() == table.dim(1),
               "embedding of {} ids in {} -> {}", ids.numel(), table.describe(), out.describe());
  // An id outside the vocabulary gives a zero row: the host checks ids before they get here.
  cuda::gather_rows_2d(view(table), table.dim(0), ids.ptr<int32_t>(), ids.numel(), table.dim(1),
                       view(out), stream_);
}

void CudaOps::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  STRATA_CHECK_DEVICE(x, "gather_rows input");
  STRATA_CHECK_DEVICE(out, "gather_rows output");
  STRATA_CHECK_I32(rows, "gather_rows indices");
  STRATA_CHECK(out.rows() == rows.numel() && out.cols() == x.cols(), "gather {} rows of {} -> {}",
               rows.numel(), x.describe(), out.describe());
  cuda::gather_rows_2d(view(x), x.rows(), rows.ptr<int32_t>(), rows.numel(), x.cols(), view(out),
                       stream_);
}

std::unique_ptr<Ops> make_cuda_ops(int gpu_id, cudaStream_t stream) {
  return std::make_unique<CudaOps>(gpu_id, stream);
}

}  // namespace strata
