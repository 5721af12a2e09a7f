#pragma once
// StageDevice: what a pipeline stage's device brings besides its ops (DESIGN.md rule 6: the
// model is written once; devices differ in ops, backends, pools and how passes launch):
// sizing and building the KV pool and its attention backend, putting each pass's inputs on
// the device, launching a pass (eagerly, or replayed from a captured CUDA graph) and bringing
// results back to the host. ModelRunner drives it; model code never sees it.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "cache/kv_layout.h"
#include "cache/kv_pool.h"
#include "cache/req_to_token_pool.h"
#include "core/tensor_ref.h"
#include "model/causal_lm.h"
#include "ops/ops.h"

namespace strata {

struct RunnerOptions;

// What one pass leaves on the device: logits [rows, vocab] f32 (raw: before any edits), and
// for sampled passes the ids drawn [rows] int32 and their logprobs [rows, width] f32; a pass
// whose grammar masks come later (PassKind::late_masks) stops before the draw, leaving the
// edited logits the draw reads in `edited`.
struct PassOutput {
  Tensor logits, ids, logprobs, edited;
  Tensor all_logits;  // a sampled pass with return_all_logits: every token's row
};
using PassFn = std::function<PassOutput(ForwardContext&)>;

class StageDevice {
 public:
  virtual ~StageDevice() = default;
  virtual Ops& ops() = 0;
  virtual std::string describe() const = 0;
  virtual Memory memory_kind() const = 0;

  // KV slots to build the pool with once the weights are resident: `requested` (0: as many
  // as the device's memory budget allows, at most `cap`). Fails when `requested` does not fit.
  // With `window_slots` > 0 the sliding-window layers take that many rows first (the window
  // space) and the slots counted are the other layers'.
  virtual int64_t plan_kv_slots(const std::map<int, KVLayerLayout>& layouts, int64_t requested,
                                int64_t cap, int64_t window_slots) = 0;
  // Bytes the stage may still take for its caches under --mem-fraction-static (what
  // plan_kv_slots sizes the KV pool from); negative: no fixed budget (host memory).
  virtual double cache_budget_bytes() { return -1.0; }
  // Builds the KV pool for `layouts` (none when empty) and the attention backend over it.
  virtual void attach(const std::map<int, KVLayerLayout>& layouts, TokenMemory& memory) = 0;
  virtual AttentionBackend* attention() = 0;
  // The KV pool (its rows in the device's memory: on the host only for the CPU device); null
  // when the stage has no attention layer.
  virtual KVPool* kv_pool() = 0;

  // Host half of a pass: checks `batch` and stages its metadata (waiting, if need be, for the
  // previous pass to release the staging memory).
  virtual void stage(const ForwardBatch& batch) = 0;
  // Queues `pass` for the staged batch with ctx's inputs on the device. A decode pass may be
  // captured once and replayed (CUDA graphs), so `pass` must queue device work only and
  // depend on nothing but the batch's shape, `kind` and the staged metadata.
  virtual PassOutput run(const ForwardBatch& batch, const PassKind& kind, const PassFn& pass) = 0;
  // Queues more work for the pass run() just queued, with the same inputs in ctx: never
  // captured, and no new workspace, so `pass` may read what run() returned but allocates
  // nothing from ops().empty() (its outputs are persistent() buffers). The draw of a pass
  // whose grammar masks were computed while its forward ran goes here.
  virtual PassOutput continue_pass(const ForwardBatch& batch, const PassFn& pass) = 0;
  // dst (a persistent() buffer, same shape and dtype) = the host tensor `src`, queued on the
  // device's stream; `src` may be reused once this returns.
  virtual void write(const Tensor& src, Tensor& dst) = 0;
  // Host copies (they wait for the device).
  virtual std::vector<int32_t> ids_to_host(const Tensor& ids) = 0;
  virtual Tensor to_host(const Tensor& t) = 0;

  // A view of shape `shape` at the start of a persistent buffer named `slot`, kept across
  // passes (its contents too) and grown when too small; growing it drops captured graphs
  // (they hold its address).
  virtual Tensor persistent(const std::string& slot, std::vector<int64_t> shape, DType dtype) = 0;
  // After ModelRunner::reserve's dummy passes: wait for them and forget what they wrote to
  // the device's request table.
  virtual void finish_reserve() {}
  // The stream passes run on (a cudaStream_t; null on the host).
  virtual void* stream() { return nullptr; }
  // Pipeline stages: the longest wait for the device, in seconds (0: none).
  virtual void set_wait_timeout(double) {}
  // Fault injection for the failure tests ("oom", "trap"), raised as the device would.
  virtual void inject_fault(const std::string& kind) = 0;
};

std::unique_ptr<StageDevice> make_cpu_stage_device(DType weight_dtype = DType::F32);

#ifdef STRATA_WITH_CUDA
// Makes RunnerOptions::gpu_id this process's (and this thread's) current GPU, then builds.
std::unique_ptr<StageDevice> make_cuda_stage_device(const RunnerOptions& options);
// Problems that keep `config` from running on --device cuda with `options`, in plain words
// (the CUDA capability rows); empty when it can run.
std::vector<std::string> cuda_configuration_problems(const ModelConfig& config,
                                                     const RunnerOptions& options);
#endif

// GPUs this process can see (0 in a build without CUDA or without a driver).
int cuda_device_count();
// True when this build can use a CUDA GPU now; otherwise `why` says what is missing (a
// build without CUDA, no device). GPU tests skip with that message.
bool cuda_available(std::string* why);

}  // namespace strata
