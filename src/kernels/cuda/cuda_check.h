#pragma once
// Every CUDA runtime and cuBLAS call goes through these checks: a failure becomes one
// strata::Error naming the call, where it was made and what the driver said, instead of a
// silent wrong answer or a crash later on.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace strata::cuda {

[[noreturn]] void cuda_failure(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void cublas_failure(cublasStatus_t status, const char* call, const char* file,
                                 int line);

// Throws strata::Error(message). For .cu files, which cannot include fmt under nvcc.
[[noreturn]] void throw_error(const std::string& message);

// True when a CUDA device can be used; otherwise `why` says what is missing.
bool device_present(std::string* why);
// Multiprocessors of the current device (cached after the first call).
int sm_count();
// The device this thread drives (cudaGetDevice).
int current_device();
// GPUs this process can see (0 when there is no driver or device).
int device_count();

// Waits until `event` has completed, polling, for at most `timeout_s` seconds (0: no limit).
// Returns false when the time ran out. `poll`, when given, runs between polls and may throw
// (a device transport checks its communicators there). Work that waits on another process
// (a NCCL transfer) is waited for this way, so a peer that hangs cannot block this one forever.
bool wait_event(cudaEvent_t event, double timeout_s, const std::function<void()>& poll = {});

}  // namespace strata::cuda

#define STRATA_CUDA_CHECK(call)                                             \
  do {                                                                      \
    const cudaError_t strata_err_ = (call);                                 \
    if (strata_err_ != cudaSuccess)                                         \
      ::strata::cuda::cuda_failure(strata_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define STRATA_CUBLAS_CHECK(call)                                                \
  do {                                                                           \
    const cublasStatus_t strata_status_ = (call);                                \
    if (strata_status_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::strata::cuda::cublas_failure(strata_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, at the launch site.
#define STRATA_CUDA_CHECK_LAUNCH() STRATA_CUDA_CHECK(cudaGetLastError())
