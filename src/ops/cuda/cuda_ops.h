#pragma once
// CudaOps: the ops interface (ops/ops.h) on one GPU. Matrices are bf16 and so is every GEMM
// input (an f32 activation is rounded into the workspace first); the residual stream, linear
// outputs, router math and every reduction stay f32. All work goes on one stream, in order;
// nothing reads device data on the host except to_host(), so a pass can be captured.
//
// Memory. empty() is a bump allocation from a per-pass arena: begin_pass() rewinds it, so
// the same sequence of calls gets the same addresses each pass (what a graph runner replays).
// A pass that outgrows the arena gets its overflow from separate allocations (never while the
// stream is being captured: that fails with a message) and the arena grows to the pass's
// high-water mark at the next begin_pass(), which then reports grew(): captured graphs hold
// the old addresses and must be dropped. Weights come from upload() and allocate(): separate,
// persistent device allocations owned by the returned tensors. empty() outside a pass (before
// the first begin_pass(), or after end_pass()) is persistent too, so that a model loaded
// with --load-format dummy (ParamLoader makes those weights with empty()) never lands in the
// arena.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "ops/ops.h"

namespace strata {

class CudaOps : public Ops {
 public:
  // Runs on GPU `gpu_id` (made current here; keep it current on the calling thread) and
  // `stream`, which stays the caller's. `arena_bytes`: the workspace reserved up front.
  CudaOps(int gpu_id, cudaStream_t stream, size_t arena_bytes = size_t{64} << 20);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  // ---- what a runner calls
  // Starts a pass: rewinds the arena, frees the previous pass's overflow and, when that pass
  // overflowed, grows the arena to its high-water mark (this synchronizes the stream; it is
  // refused while the stream is being captured).
  void begin_pass();
  // Ends the pass: empty() is persistent again until the next begin_pass(). Optional.
  void end_pass() { in_pass_ = false; }
  bool in_pass() const { return in_pass_; }
  // Whether the last begin_pass() reallocated the arena (every arena address changed).
  bool grew() const { return grew_; }
  // Incremented by every reallocation of the arena: a captured graph is valid while the
  // generation it was captured in is current.
  uint64_t arena_generation() const { return generation_; }
  // Grows the arena to at least `bytes` now (a reserve pass's measured need); not in a pass.
  void reserve(size_t bytes);
  size_t arena_capacity() const { return capacity_; }
  // The most workspace any pass since construction has used (arena and overflow together).
  size_t high_water() const { return high_water_; }
  // A persistent zero-initialized device tensor, owned by the returned tensor.
  Tensor allocate(std::vector<int64_t> shape, DType dtype) override;
  // dst = host tensor `src` (same rows x cols; its dtype, or f32 into bf16), queued on the
  // stream: how a runner puts a pass's inputs (ids, positions) into workspace tensors. Returns
  // once `src` may be reused (pageable memory is staged). Refused while capturing: a graph
  // runner writes its inputs before it replays.
  void write(const Tensor& src, Tensor& dst);
  cudaStream_t stream() const { return stream_; }
  int gpu() const { return gpu_; }
  const cuda::Blas& blas() const { return *blas_; }

  // ---- Ops
  Device device() const override { return Device::cuda(gpu_); }
  DType weight_dtype() const override { return DType::BF16; }
  DType activation_dtype() const override { return DType::BF16; }
  using Ops::empty;
  Tensor empty(std::vector<int64_t> shape, DType dtype) override;
  // Host f32 -> f32 or bf16; a host tensor of `dtype` (int32 ids, positions) is copied as is.
  Tensor upload(const Tensor& host, DType dtype) override;
  // f32 for floating tensors; int32 tensors come back as host int32.
  Tensor to_host(const Tensor& t) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;
  void fill_dummy(Tensor& t, uint64_t stream, float stddev) override;
  using Ops::linear;
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
              bool accumulate) override;
  void head_linear(const Tensor& x, const Tensor& w, int heads, Tensor& y) override;
  using Ops::rms_norm;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                Tensor& out) override;
  void add(Tensor& x, const Tensor& y) override;
  void mul(const Tensor& a, const Tensor& b, bool sigmoid_b, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void gated_activation(const Tensor& gate_up, Activation act, Tensor& out) override;
  void activation(const Tensor& x, Activation act, Tensor& out) override;
  void rope(Tensor& x, int num_heads, int64_t head_stride, const Tensor& positions,
            const RopeTable& rope) override;
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void route(const RouterConfig& cfg, const Tensor& router_logits, const Tensor* bias, Tensor& ids,
             Tensor& weights) override;
  void experts(const ExpertWeights& w, const Tensor& x, const Tensor& ids, const Tensor& weights,
               Tensor& out) override;
  void scale_columns(Tensor& x, const Tensor& scale) override;
  // The recurrent-layer ops (ops/cuda/cuda_recurrent_ops.cpp).
  void causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, bool silu,
                     const Tensor& seqs, Tensor& conv_states, Tensor& out) override;
  void ssm_scan(const Tensor& xbc, const Tensor& dt, const SsmParams& p, const Tensor& seqs,
                bool decode, Tensor& states, Tensor& y) override;
  void gated_delta_rule(const Tensor& qkv, const Tensor& b, const Tensor& a,
                        const DeltaNetParams& p, const Tensor& seqs, bool decode, Tensor& states,
                        Tensor& y) override;
  void gated_rms_norm(const Tensor& y, const Tensor& z, const Tensor* weight, int groups, float eps,
                      bool norm_before_gate, Tensor& out, SpanningGroups spanning) override;
  void gated_sum_squares(const Tensor& y, const Tensor& z, int groups, bool norm_before_gate,
                         Tensor& sums) override;
  void argmax(const Tensor& logits, Tensor& ids) override;
  void sample(const Tensor& logits, const Tensor& rows, Tensor& ids) override;
  void edit_logits(Tensor& logits, const Tensor& edits) override;
  void mask_logits(Tensor& logits, const Tensor& rows, const Tensor& masks) override;
  void logprobs(const Tensor& logits, const Tensor& ids, int top_n, Tensor& out) override;

 private:
  bool capturing() const;
  void regrow(size_t bytes);
  void* device_alloc(size_t bytes, const char* what);
  // A bf16 view of x for a GEMM operand: x itself when it is bf16, else a workspace copy.
  Tensor as_bf16(const Tensor& x);

  int gpu_;
  cudaStream_t stream_;
  std::unique_ptr<cuda::Blas> blas_;
  // The arena's free blocks, shared with the tensors empty() hands out: a tensor gives its
  // block back when its last view dies, so a pass reuses a layer's scratch for the next layer
  // (a bump allocation would hold every layer's activations at once).
  struct ArenaBlocks;
  std::shared_ptr<ArenaBlocks> blocks_;
  void* arena_ = nullptr;
  size_t capacity_ = 0, offset_ = 0;  // bytes
  size_t pass_bytes_ = 0;             // this pass's need: arena and overflow
  size_t overflow_bytes_ = 0;         // this pass's live allocations past the arena
  size_t overflow_peak_ = 0;          // their most during this pass
  size_t high_water_ = 0, last_pass_need_ = 0;
  bool in_pass_ = false, grew_ = false;
  uint64_t generation_ = 0;
};

// The factory the runner calls (a unique_ptr<Ops> whose object is a CudaOps).
std::unique_ptr<Ops> make_cuda_ops(int gpu_id, cudaStream_t stream);

}  // namespace strata
