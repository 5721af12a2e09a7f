#include "dist/staged_communicator.h"

#include <chrono>

#include "core/error.h"
#include "model/shard.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

void check_device_f32(const Tensor& t, const char* what) {
  STRATA_CHECK(!t.on_host() && t.dtype() == DType::F32,
               "the host-staged tensor-parallel group {}s device f32 tensors, not {}", what,
               t.describe());
}

}  // namespace

HostStagedCommunicator::HostStagedCommunicator(MpiCommunicator& host, int gpu,
                                               double timeout_seconds)
    : host_(host), timeout_s_(timeout_seconds) {
  // The event belongs to the GPU current when it is made: the one the stage's stream is on.
  STRATA_CUDA_CHECK(cudaSetDevice(gpu));
  STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

HostStagedCommunicator::~HostStagedCommunicator() {
  if (done_) cudaEventDestroy(done_);
}

void HostStagedCommunicator::sync(const char* what) {
  STRATA_CUDA_CHECK(cudaEventRecord(done_, stream_));
  if (!cuda::wait_event(done_, timeout_s_))
    fail(
        "tensor-parallel rank {} waited {} s for its GPU ({}); a rank it shares work with is "
        "hung, or the pass takes longer than --pp-timeout allows",
        rank(), timeout_s_, what);
}

void HostStagedCommunicator::to_host(const Tensor& src, float* dst) {
  const size_t width = static_cast<size_t>(src.cols()) * sizeof(float);
  STRATA_CUDA_CHECK(cudaMemcpy2DAsync(dst, width, src.raw(), src.row_stride() * sizeof(float),
                                      width, src.rows(), cudaMemcpyDeviceToHost, stream_));
  sync("copying a tensor to the host");
}

void HostStagedCommunicator::to_device(const float* src, const Tensor& dst) {
  const size_t width = static_cast<size_t>(dst.cols()) * sizeof(float);
  STRATA_CUDA_CHECK(cudaMemcpy2DAsync(dst.raw(), dst.row_stride() * sizeof(float), src, width,
                                      width, dst.rows(), cudaMemcpyHostToDevice, stream_));
}

void HostStagedCommunicator::all_reduce_sum(Tensor& t) {
  if (t.on_host()) return host_.all_reduce_sum(t);
  check_device_f32(t, "sum");
  STRATA_CHECK(stream_ != nullptr, "a tensor-parallel collective before bind()");
  // The compute queued before the collective is not the collective's time: wait for it first.
  sync("finishing the work before an all-reduce");
  const auto start = Clock::now();
  part_.ensure(t.bytes());
  to_host(t, part_.as<float>());
  Tensor staged = Tensor::view(part_.as<float>(), {t.rows(), t.cols()});
  host_.all_reduce_sum(staged);
  to_device(part_.as<float>(), t);
  sync("copying the sum back");
  seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  ++calls_;
}

void HostStagedCommunicator::all_gather_cols(const Tensor& part, Tensor& out) {
  if (part.on_host()) return host_.all_gather_cols(part, out);
  check_device_f32(part, "gather");
  check_device_f32(out, "gather");
  STRATA_CHECK(stream_ != nullptr, "a tensor-parallel collective before bind()");
  sync("finishing the work before an all-gather");
  const auto start = Clock::now();
  part_.ensure(part.bytes());
  whole_.ensure(static_cast<size_t>(out.rows() * out.cols()) * sizeof(float));
  to_host(part, part_.as<float>());
  const Tensor mine = Tensor::view(part_.as<float>(), {part.rows(), part.cols()});
  Tensor gathered = Tensor::view(whole_.as<float>(), {out.rows(), out.cols()});
  host_.all_gather_cols(mine, gathered);
  to_device(whole_.as<float>(), out);
  sync("copying the gathered tensor back");
  seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  ++calls_;
}

}  // namespace strata
