// The CPU reference device: ops on host memory (f32, or bf16 weight matrices), the host KV
// pool and the CPU attention backend. Passes run eagerly where they are called; the batch's
// arrays are the pass inputs.
#include <cstring>
#include <map>

#include "core/error.h"
#include "kernels/cpu/threads.h"
#include "runtime/stage_device.h"

namespace strata {

namespace {

Tensor host_ints(const std::vector<int32_t>& v) {
  return Tensor::view(const_cast<int32_t*>(v.data()), {static_cast<int64_t>(v.size())}, DType::I32,
                      Device::host());
}

class CpuStageDevice : public StageDevice {
 public:
  explicit CpuStageDevice(DType weight_dtype) : ops_(make_cpu_ops(weight_dtype)) {}
  Ops& ops() override { return *ops_; }
  std::string describe() const override { return "cpu"; }
  Memory memory_kind() const override { return Memory::Host; }

  int64_t plan_kv_slots(const std::map<int, KVLayerLayout>&, int64_t requested, int64_t cap,
                        int64_t) override {
    return requested > 0 ? requested : cap;
  }

  void attach(const std::map<int, KVLayerLayout>& layouts, TokenMemory& memory) override {
    attention_.reset();
    pool_.reset();
    if (layouts.empty()) return;
    const bool window = memory.has_window_space();
    pool_ =
        std::make_unique<KVPool>(with_dtype(layouts, DType::F32), memory.allocator().num_slots(),
                                 *ops_, window ? memory.window_allocator().num_slots() : 0);
    attention_ = make_cpu_attention_backend(pool_.get(), &memory.req_to_token(),
                                            window ? &memory.window_table() : nullptr);
  }
  AttentionBackend* attention() override { return attention_.get(); }
  KVPool* kv_pool() override { return pool_.get(); }

  void stage(const ForwardBatch& batch) override {
    batch_ = &batch;
    if (attention_) attention_->prepare(batch);
    const std::vector<int> offsets = batch.token_offsets();
    last_rows_.resize(batch.batch_size());
    for (int b = 0; b < batch.batch_size(); ++b) last_rows_[b] = offsets[b + 1] - 1;
    sampling_.resize(static_cast<size_t>(batch.batch_size()) * kSamplingRowInts);
    batch.pack_sampling(sampling_.data());
    state_seqs_.resize(static_cast<size_t>(batch.batch_size()) * kStateSeqInts);
    batch.pack_state_seqs(state_seqs_.data());
    edit_capacity_ = logit_edit_capacity(batch.logit_edits.size());
    edits_.resize(static_cast<size_t>(edit_capacity_) * kLogitEditInts);
    batch.pack_logit_edits(edits_.data(), edit_capacity_);
    mask_capacity_ = token_mask_capacity(static_cast<int64_t>(batch.mask_rows.size()));
    mask_ints_ = batch.token_mask_ints();
    mask_rows_.resize(mask_capacity_);
    masks_.resize(static_cast<size_t>(mask_capacity_) * mask_ints_);
    batch.pack_token_masks(mask_rows_.data(), masks_.data(), mask_capacity_);
  }

  PassOutput run(const ForwardBatch& batch, const PassKind&, const PassFn& pass) override {
    cpu::ScopedComputeThread pinned;  // --threads and --cpu-bind, on whichever thread runs passes
    ForwardContext ctx = context(batch);
    return pass(ctx);
  }
  // Passes run eagerly here, so more work for a pass is one more call with the same inputs.
  PassOutput continue_pass(const ForwardBatch& batch, const PassFn& pass) override {
    return run(batch, PassKind{}, pass);
  }
  void write(const Tensor& src, Tensor& dst) override {
    STRATA_CHECK(src.on_host() && dst.on_host() && src.dtype() == dst.dtype() &&
                     src.numel() == dst.numel() && src.contiguous() && dst.contiguous(),
                 "write {} into {}", src.describe(), dst.describe());
    std::memcpy(dst.raw(), src.raw(), src.bytes());
  }

  std::vector<int32_t> ids_to_host(const Tensor& ids) override {
    return std::vector<int32_t>(ids.ptr<int32_t>(), ids.ptr<int32_t>() + ids.numel());
  }
  Tensor to_host(const Tensor& t) override { return ops_->to_host(t); }

  Tensor persistent(const std::string& slot, std::vector<int64_t> shape, DType dtype) override {
    Tensor& t = buffers_[slot];
    const Tensor want = Tensor::view(nullptr, shape, dtype, Device::host());
    if (t.empty() || t.dtype() != dtype || t.bytes() < want.bytes())
      t = Tensor({std::max<int64_t>(want.numel(), 1)}, dtype);
    return Tensor::view(t.raw(), std::move(shape), dtype, Device::host(), t.owner());
  }

  void inject_fault(const std::string& kind) override {
    fail("device fault '{}' injected into a CPU stage: faults are GPU-only", kind);
  }

 private:
  // The staged batch's inputs, as views of the host arrays.
  ForwardContext context(const ForwardBatch& batch) {
    STRATA_CHECK(batch_ == &batch, "run() of a batch that was not staged");
    ForwardContext ctx;
    ctx.ops = ops_.get();
    ctx.input_ids = host_ints(batch.input_ids);
    ctx.positions = host_ints(batch.positions);
    ctx.last_token_rows = host_ints(last_rows_);
    ctx.sampling = Tensor::view(sampling_.data(), {batch.batch_size(), kSamplingRowInts},
                                DType::I32, Device::host());
    ctx.logit_edits =
        Tensor::view(edits_.data(), {edit_capacity_, kLogitEditInts}, DType::I32, Device::host());
    ctx.mask_rows = Tensor::view(mask_rows_.data(), {mask_capacity_}, DType::I32, Device::host());
    ctx.token_masks =
        Tensor::view(masks_.data(), {mask_capacity_, mask_ints_}, DType::I32, Device::host());
    ctx.state_seqs = Tensor::view(state_seqs_.data(), {batch.batch_size(), kStateSeqInts},
                                  DType::I32, Device::host());
    ctx.attention = attention_.get();
    return ctx;
  }

  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KVPool> pool_;
  std::unique_ptr<AttentionBackend> attention_;
  const ForwardBatch* batch_ = nullptr;
  std::vector<int32_t> last_rows_;
  std::vector<int32_t> sampling_;    // packed SamplingRow per request
  std::vector<int32_t> state_seqs_;  // the recurrent layers' view of the pass
  std::vector<int32_t> edits_;       // packed LogitEdit, padded to edit_capacity_
  int edit_capacity_ = 0;
  std::vector<int32_t> mask_rows_, masks_;  // grammar-masked rows and their masks, padded
  int mask_capacity_ = 0;
  int64_t mask_ints_ = 0;
  std::map<std::string, Tensor> buffers_;
};

}  // namespace

std::unique_ptr<StageDevice> make_cpu_stage_device(DType weight_dtype) {
  return std::make_unique<CpuStageDevice>(weight_dtype);
}

}  // namespace strata
