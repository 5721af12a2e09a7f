#pragma once
// ModelRunner: one process's model stage with its memory: the model's weights, the token
// memory (request -> slots, paged allocator), a KV pool for exactly the attention layers the
// stage owns (none when it owns none), and the attention backend. One path for every device:
// the model (one definition per family) runs through the device's ops; the StageDevice
// (runtime/stage_device.h) brings the pools, backends, pass inputs and graph replay.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "cache/kv_pool.h"
#include "cache/req_to_token_pool.h"
#include "cache/state_pool.h"
#include "dist/communicator.h"
#include "model/causal_lm.h"
#include "model/weights.h"
#include "runtime/stage_device.h"

namespace strata {

struct RunnerOptions {
  std::string device = "cpu";
  std::string attention_backend = "auto";
  int page_size = 1;
  double mem_fraction_static = 0.88;  // GPU: share of device memory for weights + KV cache
  bool cuda_graph = true;             // GPU: replay decode steps as CUDA graphs
  int gpu_id = 0;                     // GPU: the device this process drives (--base-gpu-id)
  // GPU: processes of this job driving the same GPU (the tensor-parallel ranks of a stage on a
  // machine with fewer GPUs than processes, dist/gpu_assignment.h): each takes its share of
  // --mem-fraction-static.
  int processes_per_gpu = 1;
  // GPU: longest wait for the device in seconds (0: no limit). Pipeline stages set their
  // --pp-timeout: their passes wait on transfers from other processes.
  double device_wait_timeout_s = 0;
  int max_running_requests = 16;
  int max_context_len = 0;       // 0: the model's max_position_embeddings (or 32768)
  bool report_load = false;      // the weights' load progress at --log-level info (the CLI)
  int64_t max_total_tokens = 0;  // KV slots; 0: max_running_requests * max_context_len, capped
  LoadFormat load_format = LoadFormat::Auto;
  uint64_t seed = 0;
  int threads = 0;                // 0: the usable CPUs, shared among cpu_slots processes
  std::string cpu_bind = "auto";  // --cpu-bind (kernels/cpu/threads.h)
  // This process's place among the job's processes on its machine (mpirun's local rank and
  // size): each takes its own CPUs.
  int cpu_slot = 0, cpu_slots = 1;
  std::optional<StagePlan> stage;  // default: the whole model
  // Tensor parallelism (docs/tensor_parallel.md): the ranks each layer is split over
  // (--tp-size), and this process's group of them (the stage process sets it; null: one rank).
  int tp_size = 1;
  Communicator* tensor_parallel = nullptr;
  // Recurrent-state pool (hybrid models): its slots in all (0: derived, see
  // mamba_state_slots()), the SSM state's storage dtype, and the prefix-cache strategy for
  // recurrent state (validated against the device capability table) with its checkpoint
  // interval (extra_buffer).
  int max_mamba_cache_size = 0;
  std::string mamba_ssm_dtype = "float32";
  // --dtype: the weight matrices' storage. auto: f32 on cpu (the reference), bf16 on cuda;
  // bfloat16: bf16 on both (the CPU widens them to f32 as it reads them); float32: cpu only.
  std::string dtype = "auto";
  // --quantization: none, or int8 (SGLang's w8a8_int8 is the same request): weight matrices
  // quantized at load to int8 with an f32 scale per row and 64 columns (DType::Q8), activations
  // quantized per row and block as each product reads them; cpu only (capability table).
  std::string quantization = "none";
  // The weight matrices' dtype: Q8 under --quantization int8, else as --dtype says.
  DType weight_dtype() const;
  std::string mamba_radix_cache_strategy = "auto";
  int mamba_track_interval = 256;
  // A serving scheduler with its radix prefix cache runs over this runner: hybrid models keep
  // state snapshots in the state pool, which is sized for them, and the Mamba cache flags are
  // validated for it.
  bool radix_cache = false;
  // Sliding-window layers keep only their window in a second slot space (TokenMemory's
  // WindowSpace; SGLang's hybrid SWA memory; --disable-hybrid-swa-memory turns it off). It
  // is sized from the most tokens one pass adds (`max_pass_tokens`: the scheduler's chunked
  // prefill size plus a decode token per running request); 0 (offline generation, whose
  // passes have no such bound) leaves the sliding layers in the full space.
  bool hybrid_swa_memory = true;
  int64_t max_pass_tokens = 0;

  // Everything that can be checked before weights load; throws one Error listing all problems.
  void validate(const ModelConfig& config) const;
  // What validate() would report, one line per problem (empty: valid), for callers that
  // gather problems of their own too.
  std::vector<std::string> problems(const ModelConfig& config) const;
  // Slots of the recurrent-state pool: --max-mamba-cache-size, or by default one per running
  // request, and with the radix cache as many again for the snapshots it keeps and the
  // decode checkpoints of running requests (both best effort: evicted or skipped when short).
  int mamba_state_slots() const;
  // --mamba-radix-cache-strategy with auto resolved for the device.
  std::string resolved_mamba_strategy() const;
  // max_context_len, or the model's max_position_embeddings (32768 when it has none).
  int resolved_max_context_len(const ModelConfig& config) const;
  // The window space for KV layers `layouts` (no slots when it is off or would not be
  // smaller than the full space of `full_slots`).
  WindowSpace window_space(const std::map<int, KVLayerLayout>& layouts, int max_context_len,
                           int64_t full_slots) const;
};

class ModelRunner {
 public:
  ModelRunner(const ModelConfig& config, const RunnerOptions& options);
  ~ModelRunner();

  // One forward pass: on the last stage logits on the host, one row per request (its last
  // token) or per token with return_all_logits; on another stage the hidden state it hands on.
  // hidden_in: the previous stage's output (stages after the first).
  Tensor forward(const ForwardBatch& batch, const Tensor& hidden_in = {});
  // One forward pass of the last stage, returning the token each request draws from its
  // logits row after batch.logit_edits, under batch.sampling (greedy where empty), drawn on
  // the device: only the ids, the logprobs asked for and the raw rows asked for come back
  // (with return_all_logits also the token rows of batch.logits_rows: prompt logprobs).
  struct SampledTokens {
    std::vector<int32_t> ids;  // [B]
    // [B x logprob_row_width(batch.top_logprobs)] when batch.top_logprobs >= 0 (ops/logprobs.h)
    std::vector<float> logprobs;
    std::vector<std::vector<float>> raw_logits;    // one row per batch.raw_logit_rows entry
    std::vector<std::vector<float>> token_logits;  // one row per batch.logits_rows entry
  };
  SampledTokens forward_sampled(const ForwardBatch& batch);
  // Grammar masks computed while the pass's forward runs (the scheduler's mask worker):
  // `rows` are the batch rows they constrain (known before the pass; batch.mask_rows is then
  // empty), `wait` blocks until their masks are there (token_mask_words(vocab) words per row,
  // in rows' order) and returns them.
  struct LateMasks {
    std::vector<int32_t> rows;
    std::function<const std::vector<uint64_t>&()> wait;
  };
  // forward_sampled in two parts: the forward (queued on a GPU, a CUDA graph when it can be;
  // run on the host device), then, once `late.wait()` returns, the masks are written to the
  // device and the draw is queued after the forward: the same draw as forward_sampled's with
  // the masks in the batch, from the same logits.
  SampledTokens forward_sampled(const ForwardBatch& batch, const LateMasks& late);

  // Pipeline stages (runtime/pipeline_pass.cpp), on any device. A stage after the first
  // receives the previous stage's hidden state [tokens, hidden_size] into stage_input(tokens);
  // forward_stage runs the batch from there (the first stage: from its tokens); a stage
  // before the last then hands stage_output() on. Both live where the runner computes (host
  // memory, or its GPU); on a GPU, forward_stage of a stage before the last only queues work.
  struct StageResult {
    Tensor logits;          // last stage, unless sampled
    SampledTokens sampled;  // last stage when sampled (as forward_sampled)
  };
  TensorRef stage_input(int num_tokens);
  StageResult forward_stage(const ForwardBatch& batch, bool sampled);
  TensorRef stage_output();
  Memory memory_kind() const { return device_->memory_kind(); }
  // Sizes the buffers of passes of up to `max_tokens` tokens and `max_batch` requests now
  // (pipeline stages: nothing may be freed once transfers are in flight).
  void reserve(int max_tokens, int max_batch);
  const StagePlan& stage() const { return stage_; }

  const ModelConfig& config() const { return config_; }
  const RunnerOptions& options() const { return options_; }
  CausalLM& model() { return *model_; }
  StageDevice& device() { return *device_; }
  std::string describe() const;
  TokenMemory& memory() { return *memory_; }
  // The KV pool (rows in the device's memory); null when the stage has no attention layer.
  KVPool* kv_pool() { return device_->kv_pool(); }
  // The recurrent-state pool: null when the model has no recurrent layer; on a stage that
  // holds none of them, a pool of slots without layers (bookkeeping only).
  StatePool* state_pool() { return state_pool_.get(); }
  // --mamba-radix-cache-strategy after resolving auto for the device.
  const std::string& mamba_radix_cache_strategy() const { return mamba_strategy_; }
  AttentionBackend* attention() { return device_->attention(); }
  int max_context_len() const { return max_context_len_; }
  // The startup lines `serve` and `generate` log at info: the configuration (model,
  // architecture, device, dtypes, page size, context length, max running requests, the
  // pipeline stage of `pp_size`) and the memory plan (weights, KV pool tokens and bytes per
  // layer layout, state-pool slots and bytes, the memory left).
  std::vector<std::string> startup_report(int pp_size) const;

 private:
  // Queues one pass; sampled: drawn ids instead of logits. Nothing is copied back here.
  PassOutput run_pass(const ForwardBatch& batch, const PassKind& kind);
  SampledTokens bring_back(const ForwardBatch& batch, const PassOutput& out);
  // A view `shape` of the persistent buffer `slot`, which is sized once for the largest pass
  // (`largest`): it never grows later, which would drop the captured graphs.
  Tensor fixed_buffer(const std::string& slot, std::vector<int64_t> shape,
                      std::vector<int64_t> largest, DType dtype);

  ModelConfig config_;
  RunnerOptions options_;
  StagePlan stage_;
  int max_context_len_ = 0;
  int stage_tokens_ = 0;  // rows of the last pass's stage_output()
  std::unique_ptr<StageDevice> device_;
  std::unique_ptr<WeightSource> weights_;
  size_t weight_bytes_ = 0;
  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<TokenMemory> memory_;
  std::unique_ptr<StatePool> state_pool_;
  std::string mamba_strategy_;
};

}  // namespace strata
