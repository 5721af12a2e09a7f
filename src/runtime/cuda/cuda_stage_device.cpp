// The CUDA device of a pipeline stage: CudaOps (bf16 weights, cuBLAS), the device KV pool and
// the CUDA attention backend, and a graph runner. Decode passes are captured per shape (tokens,
// rows, decode splits, variant) and replayed: one eager pass first (buffers settle, cuBLAS
// picks its algorithms), then a capture, then replays, valid while no buffer a graph holds
// has moved (the signature: the backend's buffers, the workspace generation, the persistent
// buffers). Model code knows nothing of this: it queues device work through the ops.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "cache/kv_pool.h"
#include "core/error.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "ops/cuda/cuda_ops.h"
#include "runtime/cuda/cuda_attention_backend.h"
#include "runtime/model_runner.h"
#include "runtime/stage_device.h"

namespace strata {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The KV cache's rows on the GPU: bf16, what the attention kernels read.
constexpr DType kKVDType = DType::BF16;

class CudaStageDevice : public StageDevice {
 public:
  explicit CudaStageDevice(const RunnerOptions& options) : options_(options) {
    STRATA_CUDA_CHECK(cudaSetDevice(options.gpu_id));
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&synced_, cudaEventDisableTiming));
    ops_ = std::make_unique<CudaOps>(options.gpu_id, stream_);
  }

  ~CudaStageDevice() override {
    for (auto& [_, g] : graphs_) cudaGraphExecDestroy(g.exec);
    for (auto& [_, u] : uploads_)
      if (u.done) cudaEventDestroy(u.done);
    attention_.reset();
    pool_.reset();
    ops_.reset();
    if (synced_) cudaEventDestroy(synced_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Ops& ops() override { return *ops_; }
  Memory memory_kind() const override { return Memory::Device; }
  void* stream() override { return stream_; }
  void set_wait_timeout(double s) override { wait_timeout_s_ = s; }

  std::string describe() const override {
    return fmt::format("cuda:{}, {} KV slots ({:.2f} GiB)", options_.gpu_id,
                       pool_ ? pool_->num_slots() : 0, pool_ ? pool_->bytes() / kGiB : 0.0);
  }

  // What --mem-fraction-static leaves of the GPU after what is in use, divided among the
  // processes that share it (tensor-parallel ranks of one stage, each with its own shard of
  // weights and caches): each rank sees the others' allocations as used, so an equal share of
  // the remainder is what keeps them all within the fraction.
  double cache_budget_bytes() override {
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    size_t free_bytes = 0, total_bytes = 0;
    STRATA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return (options_.mem_fraction_static * total_bytes -
            static_cast<double>(total_bytes - free_bytes)) /
           std::max(1, options_.processes_per_gpu);
  }

  int64_t plan_kv_slots(const std::map<int, KVLayerLayout>& layouts, int64_t requested, int64_t cap,
                        int64_t window_slots) override {
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    size_t free_bytes = 0, total_bytes = 0;
    STRATA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double used = static_cast<double>(total_bytes - free_bytes);
    // The window space's rows first (the sliding layers, window_slots each), then full slots.
    const auto full = window_slots > 0 ? KVPool::in_space(layouts, false) : layouts;
    const size_t window_bytes =
        window_slots > 0
            ? KVPool::bytes_per_slot(with_dtype(KVPool::in_space(layouts, true), kKVDType))
            : 0;
    const double budget = cache_budget_bytes() - static_cast<double>(window_slots) * window_bytes;
    const size_t per_slot = std::max<size_t>(KVPool::bytes_per_slot(with_dtype(full, kKVDType)), 1);
    if (budget <= 0)
      fail(
          "--mem-fraction-static {} leaves no room for the KV cache: {:.2f} GiB of the GPU's "
          "{:.2f} GiB are already in use; raise --mem-fraction-static or use a smaller model",
          options_.mem_fraction_static, used / kGiB, total_bytes / kGiB);
    const int64_t fits = static_cast<int64_t>(budget / per_slot);
    if (requested > 0) {
      if (requested > fits)
        fail(
            "a KV cache of {} tokens needs {:.2f} GiB but --mem-fraction-static {} leaves {:.2f} "
            "GiB; lower --max-total-tokens (at most {}) or raise --mem-fraction-static",
            requested, requested * static_cast<double>(per_slot) / kGiB,
            options_.mem_fraction_static, budget / kGiB, fits);
      return requested;
    }
    return std::min(fits, cap);
  }

  void attach(const std::map<int, KVLayerLayout>& layouts, TokenMemory& memory) override {
    attention_.reset();
    // Even a stage without attention layers uses the backend: it stages every pass's
    // metadata (ids, positions, rows) on the device.
    const bool window = memory.has_window_space();
    pool_ = std::make_unique<KVPool>(with_dtype(layouts, kKVDType), memory.allocator().num_slots(),
                                     *ops_, window ? memory.window_allocator().num_slots() : 0);
    attention_ = std::make_unique<CudaAttentionBackend>(
        pool_.get(), &memory.req_to_token(), stream_, window ? &memory.window_table() : nullptr);
    attention_->set_wait_timeout(wait_timeout_s_);
    max_requests_ = memory.req_to_token().max_requests();
  }
  AttentionBackend* attention() override { return attention_.get(); }
  // The pool exists even without attention layers (the backend stages every pass's metadata),
  // but holds rows only with them.
  KVPool* kv_pool() override {
    return pool_ && !pool_->layer_ids().empty() ? pool_.get() : nullptr;
  }

  void stage(const ForwardBatch& batch) override {
    STRATA_CHECK(attention_ != nullptr, "a pass before the KV pool is attached");
    // The current GPU is per thread, and passes may come from a thread other than the one that
    // built the device (the server's engine thread): on a rank driving GPU k, make it k.
    STRATA_CUDA_CHECK(cudaSetDevice(options_.gpu_id));
    attention_->stage(batch);
  }

  PassOutput run(const ForwardBatch& batch, const PassKind& kind, const PassFn& pass) override {
    const int rows = batch.return_all_logits ? batch.num_tokens() : batch.batch_size();
    // A tensor-parallel group whose collectives wait on the host (MPI) cannot be captured.
    const bool graphs = options_.cuda_graph &&
                        (!options_.tensor_parallel || options_.tensor_parallel->capturable());
    if (!graphs || batch.mode != ForwardMode::Decode) return launch(pass);
    const int splits = batch.mode == ForwardMode::Decode ? decode_splits() : 0;
    const GraphKey key{batch.num_tokens(), rows, splits, batch.return_all_logits, kind};
    const std::vector<const void*> signature = buffer_signature();
    auto it = graphs_.find(key);
    if (it != graphs_.end() && it->second.signature != signature) {
      cudaGraphExecDestroy(it->second.exec);
      graphs_.erase(it);
      it = graphs_.end();
    }
    if (it == graphs_.end()) {
      if (warmed_.insert(key).second) return launch(pass);
      ops_->begin_pass();
      STRATA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      PassOutput out;
      try {
        out = queue(pass);
      } catch (...) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(stream_, &broken);
        if (broken) cudaGraphDestroy(broken);
        throw;
      }
      cudaGraph_t graph = nullptr;
      STRATA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      STRATA_CUDA_CHECK(err);
      // The signature after the capture: a capture may not grow anything, but be sure.
      it = graphs_.emplace(key, Captured{exec, buffer_signature(), out}).first;
    }
    STRATA_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
    attention_->mark_queued();
    return it->second.output;
  }

  // After run(): more kernels on the stream, reading the same uploaded metadata. Eager even
  // when run() replayed a graph (what comes here depends on host work done since, the grammar
  // masks); it allocates no workspace, which a replayed graph's outputs may occupy.
  PassOutput continue_pass(const ForwardBatch&, const PassFn& pass) override {
    ForwardContext ctx = context();
    PassOutput out = pass(ctx);
    attention_->mark_queued();
    return out;
  }

  // Through a pinned copy per destination, so that the copy is queued behind the pass
  // without waiting for it (a copy from pageable memory may wait for the stream); the pinned
  // copy is rewritten only once the previous copy from it is done.
  void write(const Tensor& src, Tensor& dst) override {
    STRATA_CHECK(src.on_host() && !dst.on_host() && src.dtype() == dst.dtype() &&
                     src.numel() == dst.numel() && src.contiguous() && dst.contiguous(),
                 "write {} into {}", src.describe(), dst.describe());
    Upload& u = uploads_[dst.raw()];
    if (!u.done) STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&u.done, cudaEventDisableTiming));
    STRATA_CUDA_CHECK(cudaEventSynchronize(u.done));
    u.staging.ensure(src.bytes());
    std::memcpy(u.staging.as<char>(), src.raw(), src.bytes());
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), u.staging.as<char>(), src.bytes(),
                                      cudaMemcpyHostToDevice, stream_));
    STRATA_CUDA_CHECK(cudaEventRecord(u.done, stream_));
  }

  std::vector<int32_t> ids_to_host(const Tensor& ids) override {
    const size_t bytes = static_cast<size_t>(ids.numel()) * sizeof(int32_t);
    host_.ensure(bytes);
    STRATA_CUDA_CHECK(
        cudaMemcpyAsync(host_.as<int32_t>(), ids.raw(), bytes, cudaMemcpyDeviceToHost, stream_));
    sync();
    return std::vector<int32_t>(host_.as<int32_t>(), host_.as<int32_t>() + ids.numel());
  }

  Tensor to_host(const Tensor& t) override {
    STRATA_CHECK(t.dtype() == DType::F32 && t.contiguous(), "to_host of a {} tensor", t.describe());
    host_.ensure(t.bytes());
    STRATA_CUDA_CHECK(
        cudaMemcpyAsync(host_.as<float>(), t.raw(), t.bytes(), cudaMemcpyDeviceToHost, stream_));
    sync();
    Tensor out(t.shape());
    std::memcpy(out.data(), host_.as<float>(), t.bytes());
    return out;
  }

  Tensor persistent(const std::string& slot, std::vector<int64_t> shape, DType dtype) override {
    cuda::DeviceBuffer& b = buffers_[slot];
    const size_t bytes =
        static_cast<size_t>(Tensor::view(nullptr, shape, dtype, Device::host()).numel()) *
        dtype_size(dtype);
    if (b.bytes() < bytes) {
      // Nothing queued may still use the old buffer.
      STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      b.ensure(bytes);
    }
    return Tensor::view(b.data(), std::move(shape), dtype, Device::cuda(options_.gpu_id));
  }

  void finish_reserve() override {
    sync();
    attention_->reset_table();
    sync();
  }

  void inject_fault(const std::string& kind) override {
    if (kind == "oom") {
      cuda::DeviceBuffer too_large(size_t{1} << 50);  // 1 PiB: the allocation fails as OOM does
    } else if (kind == "trap") {
      cuda::trap(stream_);
      sync();
    } else {
      fail("unknown device fault '{}' (use oom or trap)", kind);
    }
  }

 private:
  struct GraphKey {
    int tokens, rows, splits;
    bool all_logits;
    PassKind kind;
    auto operator<=>(const GraphKey&) const = default;
  };
  struct Upload {
    cuda::PinnedBuffer staging;
    cudaEvent_t done = nullptr;  // recorded after the last copy from `staging`
  };
  struct Captured {
    cudaGraphExec_t exec;
    std::vector<const void*> signature;
    PassOutput output;
  };

  // What the decode pass's shape depends on beyond its batch: every KV layer's split count
  // (their sum; each count only grows with the batch's longest request, so a change in any
  // layer's changes the sum). One count for the widest layout would miss another layout's
  // change (MLA's latent and the GQA layouts of a hybrid take different split targets).
  int decode_splits() const {
    int splits = 0;
    for (int id : pool_->layer_ids()) splits += attention_->decode_splits(pool_->layout(id));
    return splits;
  }

  // Device work of one pass: the metadata upload, then the model.
  PassOutput queue(const PassFn& pass) {
    attention_->upload();
    ForwardContext ctx = context();
    return pass(ctx);
  }

  // The pass inputs: device views of the uploaded metadata.
  ForwardContext context() {
    ForwardContext ctx;
    ctx.ops = ops_.get();
    ctx.input_ids = attention_->input_ids();
    ctx.positions = attention_->positions();
    ctx.last_token_rows = attention_->last_token_rows();
    ctx.sampling = attention_->sampling_rows();
    ctx.logit_edits = attention_->logit_edits();
    ctx.mask_rows = attention_->mask_rows();
    ctx.token_masks = attention_->token_masks();
    ctx.state_seqs = attention_->state_seqs();
    ctx.attention = attention_.get();
    return ctx;
  }

  PassOutput launch(const PassFn& pass) {
    ops_->begin_pass();
    PassOutput out = queue(pass);
    attention_->mark_queued();
    return out;
  }

  std::vector<const void*> buffer_signature() const {
    std::vector<const void*> sig = attention_->buffer_signature();
    sig.push_back(reinterpret_cast<const void*>(ops_->arena_generation()));
    for (const auto& [_, b] : buffers_) {  // sizes too: see CudaAttentionBackend's signature
      sig.push_back(b.data());
      sig.push_back(reinterpret_cast<const void*>(b.bytes()));
    }
    return sig;
  }

  // Waits for everything queued on the stream; bounded by --pp-timeout in a pipeline stage,
  // whose stream may wait on a transfer from a stage that hangs.
  void sync() {
    if (wait_timeout_s_ <= 0) {
      STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    STRATA_CUDA_CHECK(cudaEventRecord(synced_, stream_));
    if (!cuda::wait_event(synced_, wait_timeout_s_))
      fail(
          "waited {} s for the GPU to finish a pass; a pipeline stage it waits on is hung or "
          "dead, or the pass takes longer than --pp-timeout allows",
          wait_timeout_s_);
  }

  RunnerOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t synced_ = nullptr;
  double wait_timeout_s_ = 0;
  int max_requests_ = 0;
  std::unique_ptr<CudaOps> ops_;
  std::unique_ptr<KVPool> pool_;
  std::unique_ptr<CudaAttentionBackend> attention_;
  std::map<std::string, cuda::DeviceBuffer> buffers_;
  cuda::PinnedBuffer host_;                // logits or ids on their way to the host
  std::map<const void*, Upload> uploads_;  // write()'s, by destination
  std::map<GraphKey, Captured> graphs_;
  std::set<GraphKey> warmed_;
};

}  // namespace

std::unique_ptr<StageDevice> make_cuda_stage_device(const RunnerOptions& options) {
  return std::make_unique<CudaStageDevice>(options);
}

}  // namespace strata
