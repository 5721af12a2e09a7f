#pragma once
// DeviceExecutor: a whole model stage run on an accelerator, chosen by ModelRunner from
// --device (DESIGN.md §3). It owns the device copy of the weights, the device KV pool and
// its attention backend; the host keeps the token memory (which slots a request owns) and
// hands each batch over. Model code stays device-free: a device brings its own executor.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/req_to_token_pool.h"
#include "core/tensor.h"
#include "core/tensor_ref.h"
#include "runtime/forward_batch.h"

namespace strata {

struct ModelConfig;
struct RunnerOptions;

class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  virtual std::string describe() const = 0;
  // KV slots to build the pool with, once the weights are resident: `requested` (0: as many
  // as --mem-fraction-static leaves, at most `cap`). Fails when `requested` does not fit.
  virtual int64_t plan_kv_slots(int64_t requested, int64_t cap) = 0;
  // Builds the device KV pool and request table for `memory` (its slot and row counts).
  virtual void attach(TokenMemory& memory) = 0;
  // Logits on the host, as CausalLM::forward returns them (a stage that holds the LM head).
  virtual Tensor forward(const ForwardBatch& batch) = 0;
  // The argmax of each logits row, computed on the device (no logits copied back).
  virtual std::vector<int32_t> forward_greedy(const ForwardBatch& batch) = 0;

  // Pipeline stages (the executor was built for RunnerOptions::stage). A stage after the first
  // reads its input hidden state [tokens, hidden_size] (f32, device memory) from
  // stage_input(tokens), which a device transport fills in stream order; a stage before the
  // last queues its pass with forward_hidden and leaves the result in stage_output(). Nothing
  // here waits for the device, so a stage queues its next micro-batch while one still runs.
  virtual TensorRef stage_input(int num_tokens) = 0;
  virtual void forward_hidden(const ForwardBatch& batch) = 0;
  virtual TensorRef stage_output() = 0;
  // The stream every pass runs on (a cudaStream_t): device transports order hand-overs on it.
  virtual void* stream() = 0;
  // Allocates the buffers of passes of up to `max_tokens` tokens and `max_batch` requests now
  // (see Transport::reserve for why nothing may be freed once transfers are in flight).
  virtual void reserve(int max_tokens, int max_batch) = 0;
  // Fault injection for the failure tests: "oom" (an allocation the GPU cannot hold) or "trap"
  // (a kernel that fails, leaving the device unusable), raised as the executor would.
  virtual void inject_fault(const std::string& kind) = 0;
};

#ifdef STRATA_WITH_CUDA
// Problems that keep `config` from running on --device cuda with `options`, in plain words
// (the CUDA capability table); empty when it can run.
std::vector<std::string> cuda_configuration_problems(const ModelConfig& config,
                                                     const RunnerOptions& options);
// Makes RunnerOptions::gpu_id this process's (and this thread's) current GPU, then builds.
std::unique_ptr<DeviceExecutor> make_cuda_executor(const ModelConfig& config,
                                                   const RunnerOptions& options);
#endif

// GPUs this process can see (0 in a build without CUDA or without a driver).
int cuda_device_count();

// True when this build can use a CUDA GPU now; otherwise `why` says what is missing (a
// build without CUDA, no device). GPU tests skip with that message.
bool cuda_available(std::string* why);

}  // namespace strata
