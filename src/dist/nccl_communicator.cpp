#include "dist/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/shard.h"
#include "ops/ops.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(const Tensor& t) {
  if (t.dtype() == DType::F32) return ncclFloat32;
  if (t.dtype() == DType::BF16) return ncclBfloat16;
  fail("a tensor-parallel collective over NCCL takes f32 or bf16 device tensors, not {}",
       t.describe());
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  STRATA_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// dst (strided) = src (strided), `rows` rows of `width` bytes, on `stream`.
void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
               int64_t rows, cudaStream_t stream) {
  if (rows == 0 || width == 0) return;
  STRATA_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width,
                                      static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

NcclCommunicator::NcclCommunicator(MpiCommunicator& host, int gpu, double timeout_seconds)
    : host_(host), timeout_s_(timeout_seconds) {
  STRATA_CUDA_CHECK(cudaSetDevice(gpu));
  std::vector<char> id_bytes(sizeof(ncclUniqueId));
  if (host.rank() == 0) {
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) fail("ncclGetUniqueId failed: {}", ncclGetErrorString(r));
    std::memcpy(id_bytes.data(), &id, sizeof(id));
  }
  host.broadcast(0, id_bytes);
  ncclUniqueId id;
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  try {
    settle(ncclCommInitRankConfig(&comm_, host.size(), id, host.rank(), &config),
           "setting up the tensor-parallel communicator");
  } catch (...) {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  for (Timing& t : pending_) free_.push_back(t);
  for (Timing& t : free_) {
    cudaEventDestroy(t.start);
    cudaEventDestroy(t.stop);
  }
  if (!comm_) return;
  // Finalize (flushes what is queued), bounded; a communicator that does not finish in time is
  // aborted instead.
  ncclResult_t state = ncclCommFinalize(comm_);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (state == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    ncclCommGetAsyncError(comm_, &state);
  }
  if (state == ncclSuccess)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
}

void NcclCommunicator::bind(Ops& ops, void* stream) {
  ops_ = &ops;
  stream_ = static_cast<cudaStream_t>(stream);
}

void NcclCommunicator::abort_collectives() {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::settle(ncclResult_t result, const char* what) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s_));
  while (result == ncclInProgress) {
    if (Clock::now() > deadline)
      fail(
          "tensor-parallel rank {} waited {} s for NCCL ({}); another rank is hung or dead, or "
          "takes longer than --pp-timeout allows",
          rank(), timeout_s_, what);
    std::this_thread::yield();
    if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) break;
  }
  if (result != ncclSuccess) {
    const char* detail = comm_ ? ncclGetLastError(comm_) : "";
    fail("NCCL failed {} (tensor-parallel rank {} of {}): {}{}{}", what, rank(), size(),
         ncclGetErrorString(result), detail && *detail ? ": " : "", detail ? detail : "");
  }
}

NcclCommunicator::Timing* NcclCommunicator::begin_timing() {
  if (capturing(stream_)) {
    ++untimed_calls_;
    return nullptr;
  }
  harvest();
  if (free_.empty()) {
    Timing t;
    STRATA_CUDA_CHECK(cudaEventCreate(&t.start));
    STRATA_CUDA_CHECK(cudaEventCreate(&t.stop));
    free_.push_back(t);
  }
  pending_.push_back(free_.back());
  free_.pop_back();
  STRATA_CUDA_CHECK(cudaEventRecord(pending_.back().start, stream_));
  ++calls_;
  return &pending_.back();
}

void NcclCommunicator::end_timing(Timing* t) {
  if (t) STRATA_CUDA_CHECK(cudaEventRecord(t->stop, stream_));
}

void NcclCommunicator::harvest() const {
  auto* self = const_cast<NcclCommunicator*>(this);
  while (!pending_.empty()) {
    Timing& t = pending_.front();
    const cudaError_t state = cudaEventQuery(t.stop);
    if (state == cudaErrorNotReady) return;
    STRATA_CUDA_CHECK(state);
    float ms = 0;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, t.start, t.stop));
    self->seconds_ += ms * 1e-3;
    free_.push_back(t);
    pending_.pop_front();
  }
}

double NcclCommunicator::seconds() const {
  harvest();
  return seconds_;
}

void NcclCommunicator::all_reduce_sum(Tensor& t) {
  STRATA_CHECK(!t.on_host(), "NCCL all-reduce of a host tensor {}", t.describe());
  STRATA_CHECK(stream_ != nullptr && comm_ != nullptr,
               "a tensor-parallel collective before bind()");
  const ncclDataType_t type = nccl_type(t);
  const size_t elem = dtype_size(t.dtype()), width = static_cast<size_t>(t.cols()) * elem;
  const size_t count = static_cast<size_t>(t.rows() * t.cols());
  Timing* timing = begin_timing();
  if (t.contiguous()) {
    settle(ncclAllReduce(t.raw(), t.raw(), count, type, ncclSum, comm_, stream_),
           "in an all-reduce");
  } else {
    // A strided view (a column slice): summed in a contiguous copy from the pass's workspace.
    Tensor flat = ops_->empty({t.rows(), t.cols()}, t.dtype());
    copy_rows(flat.raw(), width, t.raw(), t.row_stride() * elem, width, t.rows(), stream_);
    settle(ncclAllReduce(flat.raw(), flat.raw(), count, type, ncclSum, comm_, stream_),
           "in an all-reduce");
    copy_rows(t.raw(), t.row_stride() * elem, flat.raw(), width, width, t.rows(), stream_);
  }
  end_timing(timing);
}

// NCCL gathers equal blocks: every rank sends a block [rows, ceil(C / size)] (the last rank's
// part padded), the blocks land one after the other, and each block's real columns are copied
// into out's columns Shard{q, size}.range(C).
void NcclCommunicator::all_gather_cols(const Tensor& part, Tensor& out) {
  STRATA_CHECK(!part.on_host() && !out.on_host(), "NCCL all-gather of host tensors ({} into {})",
               part.describe(), out.describe());
  STRATA_CHECK(stream_ != nullptr && comm_ != nullptr,
               "a tensor-parallel collective before bind()");
  STRATA_CHECK(part.dtype() == out.dtype(), "all-gather of {} into {}", part.describe(),
               out.describe());
  const int64_t rows = out.rows(), cols = out.cols();
  const int n = size();
  const Shard mine{rank(), n};
  STRATA_CHECK(part.rows() == rows && part.cols() == mine.size(cols),
               "rank {} of {} gathers {} into {}", rank(), n, part.describe(), out.describe());
  const ncclDataType_t type = nccl_type(out);
  const size_t elem = dtype_size(out.dtype());
  const int64_t piece = Shard{0, n}.size(cols);  // the widest part
  const size_t block = static_cast<size_t>(rows * piece);
  Timing* timing = begin_timing();
  Tensor send;
  const void* send_data = part.raw();
  if (!(part.contiguous() && part.cols() == piece)) {
    send = ops_->empty({rows, piece}, out.dtype());
    copy_rows(send.raw(), piece * elem, part.raw(), part.row_stride() * elem, part.cols() * elem,
              rows, stream_);
    send_data = send.raw();
  }
  Tensor blocks = ops_->empty({n * rows, piece}, out.dtype());
  settle(ncclAllGather(send_data, blocks.raw(), block, type, comm_, stream_), "in an all-gather");
  for (int q = 0; q < n; ++q) {
    const Shard s{q, n};
    copy_rows(static_cast<char*>(out.raw()) + s.begin(cols) * elem, out.row_stride() * elem,
              static_cast<const char*>(blocks.raw()) + q * block * elem, piece * elem,
              s.size(cols) * elem, rows, stream_);
  }
  end_timing(timing);
}

}  // namespace strata
