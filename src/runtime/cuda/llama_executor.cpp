// Per layer, as the host model (models/llama.cpp):
//   h = x + o_proj(Attn(rope(norm_qk(qkv_proj(RMSNorm(x))))))
//   x = h + down_proj(silu(gate_proj(RMSNorm(h))) * up_proj(RMSNorm(h)))
// o_proj and down_proj add into the residual stream inside the GEMM (beta = 1), so the f32
// residual stream `hidden_` is the whole state between layers: a pipeline stage hands exactly
// that buffer (hidden state and residual in one) to the next stage. A stage holds the
// weights and KV cache of its own layers only; the embedding on the first stage, the final
// norm and LM head on the last.
#include "runtime/cuda/llama_executor.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "kernels/cuda/gemm.h"
#include "layers/rope.h"
#include "runtime/cuda/cuda_attention_backend.h"
#include "runtime/cuda/device_weights.h"

namespace strata {

namespace {

using cuda::bf16;
using cuda::DeviceBuffer;

struct LayerWeights {
  DeviceBuffer qkv, qkv_bias, o, o_bias, gate_up, gate_up_bias, down, down_bias;
  DeviceBuffer input_norm, post_attention_norm, q_norm, k_norm;
  int sliding_window = 0;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class CudaLlamaExecutor : public DeviceExecutor {
 public:
  CudaLlamaExecutor(const ModelConfig& c, const RunnerOptions& options, const LlamaVariant& variant)
      : c_(c), options_(options), stage_(options.stage.value_or(StagePlan::whole(c))) {
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&synced_, cudaEventDisableTiming));
    blas_ = std::make_unique<cuda::Blas>(stream_);
    hq_ = c.num_attention_heads;
    hkv_ = c.num_kv_heads;
    hd_ = c.head_dim;
    q_width_ = hq_ * hd_;
    qkv_width_ = q_width_ + 2 * hkv_ * hd_;
    gelu_ = !(c.hidden_act == "silu" || c.hidden_act == "swish");
    eps_ = static_cast<float>(c.rms_norm_eps);
    load_weights(variant);
    const int rotary_dim = static_cast<int>(hd_ * c.rope.partial_rotary_factor);
    const RotaryEmbedding rope(c.rope, rotary_dim);
    inv_freq_ = cuda::to_device(rope.inv_freq());
    rope_.num_q_heads = hq_;
    rope_.num_k_heads = hkv_;
    rope_.head_dim = hd_;
    rope_.row_stride = qkv_width_;
    rope_.k_offset = q_width_;
    rope_.norm_eps = eps_;
    rope_.inv_freq = inv_freq_.as<float>();
    rope_.rotary_dim = rotary_dim;
    rope_.cos_sin_scale = rope.cos_sin_scale();
  }

  ~CudaLlamaExecutor() override {
    for (auto& [_, g] : graphs_) cudaGraphExecDestroy(g.exec);
    attention_.reset();
    if (synced_) cudaEventDestroy(synced_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string describe() const override {
    return fmt::format(
        "cuda:{}: layers [{}, {}) of {}, {:.2f} GiB of weights, {} KV slots ({:.2f} GiB)",
        options_.gpu_id, stage_.start_layer, stage_.end_layer, c_.num_layers, weights_bytes_ / kGiB,
        pool_ ? pool_->num_slots() : 0, pool_ ? pool_->bytes() / kGiB : 0.0);
  }

  // The attention layers of this stage only (DESIGN.md §1.1: the pool answers by global id).
  std::map<int, KVLayerLayout> kv_layouts() const {
    std::map<int, KVLayerLayout> out;
    for (int id : c_.attention_layer_ids())
      if (stage_.owns(id)) out[id] = KVLayerLayout{hkv_, hd_, hd_, false};
    return out;
  }

  int64_t plan_kv_slots(int64_t requested, int64_t cap) override {
    size_t free_bytes = 0, total_bytes = 0;
    STRATA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double used = static_cast<double>(total_bytes - free_bytes);
    const double budget = options_.mem_fraction_static * total_bytes - used;
    const size_t per_slot = DeviceKVPool::bytes_per_slot(kv_layouts());
    if (budget <= 0)
      fail(
          "--mem-fraction-static {} leaves no room for the KV cache: {:.2f} GiB of the GPU's "
          "{:.2f} GiB are "
          "already in use (weights {:.2f} GiB); raise --mem-fraction-static or use a smaller model",
          options_.mem_fraction_static, used / kGiB, total_bytes / kGiB, weights_bytes_ / kGiB);
    const int64_t fits = static_cast<int64_t>(budget / per_slot);
    if (requested > 0) {
      if (requested > fits)
        fail(
            "a KV cache of {} tokens needs {:.2f} GiB but --mem-fraction-static {} leaves {:.2f} "
            "GiB; lower "
            "--max-total-tokens (at most {}) or raise --mem-fraction-static",
            requested, requested * static_cast<double>(per_slot) / kGiB,
            options_.mem_fraction_static, budget / kGiB, fits);
      return requested;
    }
    return std::min(fits, cap);
  }

  void attach(TokenMemory& memory) override {
    attention_.reset();
    pool_ = std::make_unique<DeviceKVPool>(kv_layouts(), memory.allocator().num_slots());
    attention_ =
        std::make_unique<CudaAttentionBackend>(pool_.get(), memory.req_to_token().max_requests(),
                                               memory.req_to_token().max_context_len(), stream_);
    attention_->set_wait_timeout(options_.device_wait_timeout_s);
  }

  Tensor forward(const ForwardBatch& batch) override {
    STRATA_CHECK(stage_.is_last, "logits asked of a stage without the LM head");
    const int rows = run(batch);
    const size_t bytes = static_cast<size_t>(rows) * c_.vocab_size * sizeof(float);
    host_.ensure(bytes);
    STRATA_CUDA_CHECK(
        cudaMemcpyAsync(host_.as<float>(), logits_.data(), bytes, cudaMemcpyDeviceToHost, stream_));
    sync();
    Tensor logits({rows, c_.vocab_size});
    std::memcpy(logits.data(), host_.as<float>(), bytes);
    return logits;
  }

  std::vector<int32_t> forward_greedy(const ForwardBatch& batch) override {
    STRATA_CHECK(stage_.is_last, "logits asked of a stage without the LM head");
    const int rows = run(batch);
    ids_.ensure(rows * sizeof(int32_t));
    cuda::argmax_rows(logits_.as<float>(), rows, c_.vocab_size, ids_.as<int32_t>(), stream_);
    host_.ensure(rows * sizeof(int32_t));
    STRATA_CUDA_CHECK(cudaMemcpyAsync(host_.as<int32_t>(), ids_.data(), rows * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream_));
    sync();
    return std::vector<int32_t>(host_.as<int32_t>(), host_.as<int32_t>() + rows);
  }

  TensorRef stage_input(int num_tokens) override {
    STRATA_CHECK(!stage_.is_first, "the first stage embeds its tokens: it takes no input");
    hidden_.ensure(static_cast<size_t>(num_tokens) * c_.hidden_size * sizeof(float));
    return {hidden_.as<float>(), {num_tokens, c_.hidden_size}, Memory::Device};
  }

  void forward_hidden(const ForwardBatch& batch) override {
    STRATA_CHECK(!stage_.is_last, "the last stage returns logits, not a hidden state");
    run(batch);
  }

  TensorRef stage_output() override {
    STRATA_CHECK(!stage_.is_last, "the last stage returns logits, not a hidden state");
    return {hidden_.as<float>(), {last_tokens_, c_.hidden_size}, Memory::Device};
  }

  void* stream() override { return stream_; }

  void reserve(int max_tokens, int max_batch) override {
    STRATA_CHECK(attention_ != nullptr, "reserve before the KV pool is attached");
    ensure_activations(max_tokens, stage_.is_last ? max_batch : 0);
    attention_->reserve(max_tokens, max_batch, hq_);
    ids_.ensure(static_cast<size_t>(max_batch) * sizeof(int32_t));
    if (stage_.is_last)
      host_.ensure(static_cast<size_t>(max_batch) * c_.vocab_size * sizeof(float));
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
  void load_weights(const LlamaVariant& variant) {
    auto source = open_weights(c_.model_dir, options_.load_format, options_.seed);
    DeviceWeights w(*source, options_.load_format == LoadFormat::Dummy, options_.seed, stream_);
    const int64_t h = c_.hidden_size, inter = c_.intermediate_size, kv_out = int64_t{hkv_} * hd_;
    // The embedding table on the first stage, and on the last when the LM head is tied to it.
    if (stage_.is_first || (stage_.is_last && c_.tie_word_embeddings))
      embed_ = w.table("model.embed_tokens.weight", c_.vocab_size, h);
    for (int id = stage_.start_layer; id < stage_.end_layer; ++id) {
      const std::string p = fmt::format("model.layers.{}.", id);
      const std::string a = p + "self_attn.", m = p + "mlp.";
      const bool qkv_bias = variant.qkv_bias || c_.attention_bias;
      LayerWeights l;
      l.qkv = w.matrix({a + "q_proj", a + "k_proj", a + "v_proj"}, h, {q_width_, kv_out, kv_out});
      l.qkv_bias = w.biases({a + "q_proj", a + "k_proj", a + "v_proj"}, {q_width_, kv_out, kv_out},
                            qkv_bias);
      l.o = w.matrix({a + "o_proj"}, q_width_, {h});
      l.o_bias = w.biases({a + "o_proj"}, {h}, c_.attention_bias);
      l.gate_up = w.matrix({m + "gate_proj", m + "up_proj"}, h, {inter, inter});
      l.gate_up_bias = w.biases({m + "gate_proj", m + "up_proj"}, {inter, inter}, c_.mlp_bias);
      l.down = w.matrix({m + "down_proj"}, inter, {h});
      l.down_bias = w.biases({m + "down_proj"}, {h}, c_.mlp_bias);
      l.input_norm = w.vector(p + "input_layernorm.weight", h);
      l.post_attention_norm = w.vector(p + "post_attention_layernorm.weight", h);
      if (variant.qk_norm) {
        l.q_norm = w.vector(a + "q_norm.weight", hd_);
        l.k_norm = w.vector(a + "k_norm.weight", hd_);
      }
      l.sliding_window = c_.layers[id].sliding_window;
      layers_.push_back(std::move(l));
    }
    if (stage_.is_last) {
      final_norm_ = w.vector("model.norm.weight", h);
      if (!c_.tie_word_embeddings) lm_head_ = w.matrix({"lm_head"}, h, {c_.vocab_size});
    }
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    weights_bytes_ = w.bytes();
    const auto unused = source->unused();
    if (stage_.is_first && stage_.is_last && !unused.empty())
      std::fprintf(stderr, "warning: %zu checkpoint tensors were not used (first: %s)\n",
                   unused.size(), unused.front().c_str());
  }

  void ensure_activations(int t, int rows) {
    const size_t h = c_.hidden_size, inter = c_.intermediate_size;
    hidden_.ensure(t * h * sizeof(float));
    x_bf16_.ensure(t * std::max<size_t>(h, q_width_) * sizeof(bf16));
    qkv_.ensure(t * static_cast<size_t>(qkv_width_) * sizeof(float));
    gate_up_.ensure(t * 2 * inter * sizeof(float));
    act_.ensure(t * inter * sizeof(bf16));
    logits_.ensure(static_cast<size_t>(rows) * c_.vocab_size * sizeof(float));
  }

  // One forward pass into logits_; returns its number of rows. Decode passes replay a CUDA
  // graph per (batch, splits) shape: one eager pass first (buffers settle, cuBLAS picks its
  // algorithms), then a capture, then replays, valid while no buffer has moved.
  int run(const ForwardBatch& batch) {
    STRATA_CHECK(attention_ != nullptr, "forward before the KV pool is attached");
    attention_->stage(batch);
    const int t = batch.num_tokens();
    const int rows = batch.return_all_logits ? t : batch.batch_size();
    ensure_activations(t, stage_.is_last ? rows : 0);
    last_tokens_ = t;
    if (!options_.cuda_graph || batch.mode != ForwardMode::Decode) {
      launch(t, rows, batch.return_all_logits);
      attention_->mark_queued();
      return rows;
    }
    const GraphKey key{t, rows, attention_->decode_splits(hkv_), batch.return_all_logits};
    const std::vector<const void*> signature = buffer_signature();
    auto it = graphs_.find(key);
    if (it != graphs_.end() && it->second.signature != signature) {
      cudaGraphExecDestroy(it->second.exec);
      graphs_.erase(it);
      it = graphs_.end();
    }
    if (it == graphs_.end()) {
      if (warmed_.insert(key).second) {
        launch(t, rows, batch.return_all_logits);
        attention_->mark_queued();
        return rows;
      }
      STRATA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        launch(t, rows, batch.return_all_logits);
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
      it = graphs_.emplace(key, CapturedGraph{exec, signature}).first;
    }
    STRATA_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
    attention_->mark_queued();
    return rows;
  }

  // Waits for everything queued on the stream; bounded by --pp-timeout in a pipeline stage,
  // whose stream may wait on a transfer from a stage that hangs.
  void sync() {
    if (options_.device_wait_timeout_s <= 0) {
      STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    STRATA_CUDA_CHECK(cudaEventRecord(synced_, stream_));
    if (!cuda::wait_event(synced_, options_.device_wait_timeout_s))
      fail(
          "waited {} s for the GPU to finish a pass; a pipeline stage it waits on is hung or "
          "dead, or the pass takes longer than --pp-timeout allows",
          options_.device_wait_timeout_s);
  }

  std::vector<const void*> buffer_signature() const {
    std::vector<const void*> sig = attention_->buffer_signature();
    for (const DeviceBuffer* b : {&hidden_, &x_bf16_, &qkv_, &gate_up_, &act_, &logits_})
      sig.push_back(b->data());
    return sig;
  }

  // Everything a pass puts on the stream: device work only (graph-capturable).
  void launch(int t, int rows, bool all_logits) {
    const int h = c_.hidden_size, inter = c_.intermediate_size;
    attention_->upload();
    float* hidden = hidden_.as<float>();
    float* qkv = qkv_.as<float>();
    bf16* x = x_bf16_.as<bf16>();
    const cudaStream_t s = stream_;
    // Later stages start from the hidden state the transport copied into hidden_.
    if (stage_.is_first)
      cuda::embedding(embed_.as<bf16>(), attention_->input_ids(), t, h, hidden, s);
    const int64_t kv_w = int64_t{hkv_} * hd_;
    for (int id = stage_.start_layer; id < stage_.end_layer; ++id) {
      const LayerWeights& l = layers_[id - stage_.start_layer];
      cuda::rms_norm(hidden, nullptr, l.input_norm.as<float>(), t, h, eps_, 0.0f, x, s);
      blas_->linear(x, t, h, l.qkv.as<bf16>(), qkv_width_, qkv);
      if (l.qkv_bias.data()) cuda::add_bias(qkv, l.qkv_bias.as<float>(), t, qkv_width_, s);
      cuda::RopeParams rope = rope_;
      rope.q_norm = l.q_norm.as<float>();
      rope.k_norm = l.k_norm.as<float>();
      cuda::qk_norm_rope(qkv, attention_->positions(), t, rope, s);
      AttentionCall call;
      call.layer_id = id;
      call.num_q_heads = hq_;
      call.scale = 1.0f / std::sqrt(static_cast<float>(hd_));
      call.sliding_window = l.sliding_window;
      attention_->forward_rows(call, qkv, qkv + q_width_, qkv + q_width_ + kv_w, qkv_width_, x);
      blas_->linear(x, t, q_width_, l.o.as<bf16>(), h, hidden, 1.0f);
      if (l.o_bias.data()) cuda::add_bias(hidden, l.o_bias.as<float>(), t, h, s);

      cuda::rms_norm(hidden, nullptr, l.post_attention_norm.as<float>(), t, h, eps_, 0.0f, x, s);
      blas_->linear(x, t, h, l.gate_up.as<bf16>(), 2 * inter, gate_up_.as<float>());
      if (l.gate_up_bias.data())
        cuda::add_bias(gate_up_.as<float>(), l.gate_up_bias.as<float>(), t, 2 * inter, s);
      cuda::gated_act(gate_up_.as<float>(), t, inter, gelu_, act_.as<bf16>(), s);
      blas_->linear(act_.as<bf16>(), t, inter, l.down.as<bf16>(), h, hidden, 1.0f);
      if (l.down_bias.data()) cuda::add_bias(hidden, l.down_bias.as<float>(), t, h, s);
    }
    if (!stage_.is_last) return;
    // Logits only where needed: each request's last token unless all are asked for.
    cuda::rms_norm(hidden, all_logits ? nullptr : attention_->last_token_rows(),
                   final_norm_.as<float>(), rows, h, eps_, 0.0f, x, s);
    const bf16* head = c_.tie_word_embeddings ? embed_.as<bf16>() : lm_head_.as<bf16>();
    blas_->linear(x, rows, h, head, c_.vocab_size, logits_.as<float>());
  }

  struct GraphKey {
    int tokens, rows, splits;
    bool all_logits;
    auto operator<=>(const GraphKey&) const = default;
  };
  struct CapturedGraph {
    cudaGraphExec_t exec;
    std::vector<const void*> signature;
  };

  ModelConfig c_;
  RunnerOptions options_;
  StagePlan stage_;
  int last_tokens_ = 0;  // tokens of the last pass (the rows of stage_output())
  cudaStream_t stream_ = nullptr;
  cudaEvent_t synced_ = nullptr;
  std::unique_ptr<cuda::Blas> blas_;
  int hq_ = 0, hkv_ = 0, hd_ = 0;
  int64_t q_width_ = 0, qkv_width_ = 0;
  bool gelu_ = false;
  float eps_ = 1e-6f;
  size_t weights_bytes_ = 0;
  DeviceBuffer embed_, final_norm_, lm_head_, inv_freq_;
  std::vector<LayerWeights> layers_;
  cuda::RopeParams rope_;
  std::unique_ptr<DeviceKVPool> pool_;
  std::unique_ptr<CudaAttentionBackend> attention_;
  DeviceBuffer hidden_, x_bf16_, qkv_, gate_up_, act_, logits_, ids_;
  cuda::PinnedBuffer host_;  // logits or ids on their way to the host
  std::map<GraphKey, CapturedGraph> graphs_;
  std::set<GraphKey> warmed_;
};

}  // namespace

std::unique_ptr<DeviceExecutor> make_cuda_llama_executor(const ModelConfig& config,
                                                         const RunnerOptions& options,
                                                         const LlamaVariant& variant) {
  return std::make_unique<CudaLlamaExecutor>(config, options, variant);
}

}  // namespace strata
