#pragma once
// Ops: the interface every model family is written against (DESIGN.md rule 6: a family is
// written once, for every device). A model file calls these; a device differs only in their
// implementation: `CpuOps` (f32, the reference every other device is tested against) and
// `CudaOps` (bf16 weights and GEMM inputs, f32 residual stream and reductions, cuBLAS).
//
// Memory: tensors an op returns come from the current pass's workspace (Workspace below), so
// a pass allocates nothing from the device allocator once warmed up and a decode step has the
// same addresses every time it runs with the same shapes: what lets a graph runner outside
// the model capture and replay it. The one rule for model code: nothing inside a forward
// reads device data on the host.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/state_seqs.h"

namespace strata {

// Activations of MLPs and experts, parsed once from config.json (parse_activation). Gelu is
// the exact (erf) form. ClampedSwiglu is gated only and combines gate and up itself
// (kernels/gated_activation_math.h: gpt-oss's experts); the others gate as act(gate) * up.
enum class Activation { Silu, Gelu, GeluTanh, Relu2, ClampedSwiglu };
// `name` as config.json spells it (hidden_act, mlp_hidden_act, ...); `field` names the key in
// the error for anything else.
Activation parse_activation(const std::string& name, const std::string& field = "hidden_act");

// Rotary embedding of one layer: the frequency table (f32, on the ops' device) and how it is
// applied. Built by RotaryEmbedding (layers/rope.h) from the config's rope settings.
struct RopeTable {
  Tensor inv_freq;  // [rotary_dim / 2]
  int rotary_dim = 0;
  bool interleaved = false;  // rotate pairs (2i, 2i+1) instead of halves
  float cos_sin_scale = 1.0f;
};

// How a router picks experts (layers/moe.h has the families' settings).
enum class RouterScoring { Softmax, Sigmoid };
enum class GroupScore {
  Max,        // highest expert score in the group (DeepSeek-V2 group_limited_greedy)
  TopTwoSum,  // sum of the two highest (DeepSeek-V3 noaux_tc, NemotronH)
};
struct RouterConfig {
  int num_experts = 0;
  int top_k = 0;
  RouterScoring scoring = RouterScoring::Softmax;
  int num_groups = 1;   // 1: no group limit
  int topk_groups = 1;  // groups kept per token
  GroupScore group_score = GroupScore::Max;
  bool correction_bias = false;  // add e_score_correction_bias to scores for the choice only
  bool normalize_topk = false;   // renormalize the chosen weights to sum to 1
  float routed_scaling_factor = 1.0f;

  // Rejects inconsistent settings with a message naming the config fields.
  void validate() const;
};

// The routed experts of one MoE layer, stacked: expert e's first projection (gate|up when
// gated, up otherwise) is rows [e * in_rows, (e + 1) * in_rows) of `w_in`, its down
// projection rows [e * hidden, (e + 1) * hidden) of `w_down`.
struct ExpertWeights {
  int num_experts = 0, hidden = 0, intermediate = 0;
  bool gated = true;
  Activation activation = Activation::Silu;
  Tensor w_in;          // [E * (gated ? 2 : 1) * I, H]
  Tensor w_down;        // [E * H, I]
  Tensor b_in, b_down;  // optional biases, [E * in_rows] and [E * H]
};

// The SSM of one Mamba2 layer (layers/mamba2.h): heads of head_dim channels, n_groups groups
// of B and C of state_size each; dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max).
struct SsmParams {
  int num_heads = 0, head_dim = 0, n_groups = 1, state_size = 0;
  int chunk_size = 256;  // prefill's SSD chunk length
  float dt_min = 0.0f, dt_max = 0.0f;
  Tensor A;        // [heads] f32, -exp(A_log)
  Tensor D;        // [heads] f32, the skip connection
  Tensor dt_bias;  // [heads] f32
};

// The gated delta rule of one Gated DeltaNet layer (layers/gated_delta_net.h): v_heads value
// heads of v_dim, k_heads key heads of k_dim (value head h reads key head h / (v_heads /
// k_heads)); per token beta = sigmoid(b), g = A softplus(a + dt_bias) (the log decay).
struct DeltaNetParams {
  int num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int chunk_size = 64;  // prefill's chunk length
  Tensor A;             // [v_heads] f32, -exp(A_log)
  Tensor dt_bias;       // [v_heads] f32
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  // The dtype matrices are stored in (f32 on the CPU reference, bf16 on CUDA; bf16 or Q8 on
  // the CPU as --dtype / --quantization choose).
  virtual DType weight_dtype() const = 0;
  // The dtype of activations that feed a GEMM: outputs of norms, activations, attention.
  virtual DType activation_dtype() const = 0;

  // ---- memory
  // A tensor from the current pass's workspace; its contents are undefined. Outside a pass
  // (CudaOps: before begin_pass or after end_pass) it is persistent, as allocate() is.
  virtual Tensor empty(std::vector<int64_t> shape, DType dtype) = 0;
  // A persistent zero-filled tensor owned by the result, outside every pass's workspace
  // (weights made here, KV pools). The zeros are queued on the device's stream.
  virtual Tensor allocate(std::vector<int64_t> shape, DType dtype) = 0;
  Tensor empty(std::vector<int64_t> shape) { return empty(std::move(shape), DType::F32); }
  Tensor empty_activation(std::vector<int64_t> shape) {
    return empty(std::move(shape), activation_dtype());
  }
  Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::F32);
  // A persistent copy of a host tensor on this device, converted to `dtype` (weights, tables).
  virtual Tensor upload(const Tensor& host, DType dtype) = 0;
  // A host f32 copy; waits for the device. Never inside a forward (see above).
  virtual Tensor to_host(const Tensor& t) = 0;
  // dst = src elementwise (same rows x cols; strides and dtypes may differ).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, float value) = 0;
  // t[i] = dummy_value(stream, i, stddev) (core/dummy_random.h): --load-format dummy, made
  // where the tensor lives, the same values on every device.
  virtual void fill_dummy(Tensor& t, uint64_t stream, float stddev) = 0;

  // ---- math. Every op takes rows x cols views (Tensor::slice_cols gives strided ones).
  // y = x W^T (+ bias), or y += x W^T (+ bias) with `accumulate` (o_proj and down_proj add
  // into the residual stream). x [rows, in], W [out, in], y [rows, out] f32.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                      bool accumulate) = 0;
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias = nullptr);
  // For each of `heads` heads: y_h = x_h W_h^T, x_h = columns [h * K, (h + 1) * K) of x,
  // W_h = rows [h * N, (h + 1) * N) of w [heads * N, K], y_h likewise [rows, N] of y.
  // (MLA's absorbed per-head projections.)
  virtual void head_linear(const Tensor& x, const Tensor& w, int heads, Tensor& y) = 0;
  // out = x / rms(x) * (w + weight_offset) over each group of w.numel() columns of every row
  // (one group: a whole-row norm; head_dim groups: per-head q/k norms). out may be x.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                        Tensor& out) = 0;
  Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset = 0.0f);
  virtual void add(Tensor& x, const Tensor& y) = 0;  // x += y
  // out = a * g(b) elementwise, g(b) = sigmoid(b) with `sigmoid_b`, else b; b [rows, cols] or
  // [rows, 1] (one factor per row). Strided views; out may be a. The gates of LFM2's short conv
  // (B * x, C * conv), Qwen3-Next's attention output gate and its shared expert's gate.
  virtual void mul(const Tensor& a, const Tensor& b, bool sigmoid_b, Tensor& out) = 0;
  virtual void scale(Tensor& x, float s) = 0;  // x *= s
  // gate_up = [gate | up] [rows, 2I] -> out [rows, I] = act(gate) * up.
  virtual void gated_activation(const Tensor& gate_up, Activation act, Tensor& out) = 0;
  // out = act(x) elementwise.
  virtual void activation(const Tensor& x, Activation act, Tensor& out) = 0;
  // Rotates `num_heads` heads of x [T, *] in place; head h of a row starts at column
  // h * head_stride; positions [T] int32.
  virtual void rope(Tensor& x, int num_heads, int64_t head_stride, const Tensor& positions,
                    const RopeTable& rope) = 0;
  // out[t] = table[ids[t]]; ids [T] int32, out [T, width] f32.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // out[r] = x[rows[r]]; rows int32.
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;

  // ---- mixture of experts
  // router_logits [T, E] -> ids [T, top_k] int32, weights [T, top_k] f32 (layers/moe.h).
  virtual void route(const RouterConfig& cfg, const Tensor& router_logits, const Tensor* bias,
                     Tensor& ids, Tensor& weights) = 0;
  // out [T, H] += sum_k weights[t, k] * expert_{ids[t, k]}(x[t]): tokens grouped by expert.
  virtual void experts(const ExpertWeights& w, const Tensor& x, const Tensor& ids,
                       const Tensor& weights, Tensor& out) = 0;

  // x[r, c] *= scale[c]: per-column multipliers (Falcon-H1's muP in_proj multipliers).
  virtual void scale_columns(Tensor& x, const Tensor& scale) = 0;

  // ---- recurrent layers (Mamba2, LFM2's short conv; layers/mamba2.h and layers/short_conv.h
  // have the math, kernels/cpu/mamba.h the reference). Each takes the pass's seqs
  // [B, kStateSeqInts] (ops/state_seqs.h) and the pool's state tensors, one row per slot, and
  // serves every request of the pass at once. out [T, C] f32 = bias + causal depthwise conv of
  // x [T, C] (strided) with weight [C, K] f32, then SiLU when `silu` (Mamba2; the short conv has
  // none); conv_states [slots, C * (K - 1)] f32 hold each slot's last K-1 inputs (oldest
  // first) and are updated.
  virtual void causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, bool silu,
                             const Tensor& seqs, Tensor& conv_states, Tensor& out) = 0;
  // The selective scan of xbc [T, heads*head_dim + 2*groups*state_size] (x | B | C, strided)
  // with raw dt [T, heads] (strided): y [T, heads*head_dim] f32 = scan + D x, from and into
  // states [slots, heads*head_dim*state_size] (f32 or bf16). Decode runs the one-step
  // recurrence; otherwise the SSD chunked form by chunks of p.chunk_size.
  virtual void ssm_scan(const Tensor& xbc, const Tensor& dt, const SsmParams& p, const Tensor& seqs,
                        bool decode, Tensor& states, Tensor& y) = 0;
  // The gated delta rule (Qwen3-Next; kernels/cpu/delta_rule.h has the math) over qkv [T,
  // 2 k_heads k_dim + v_heads v_dim] (the conv output q | k | v, strided) with raw b, a
  // [T, v_heads] (strided): y [T, v_heads * v_dim] f32, from and into states [slots, v_heads *
  // k_dim * v_dim] (f32 or bf16). Decode runs the recurrence; otherwise the chunked form by
  // chunks of p.chunk_size.
  virtual void gated_delta_rule(const Tensor& qkv, const Tensor& b, const Tensor& a,
                                const DeltaNetParams& p, const Tensor& seqs, bool decode,
                                Tensor& states, Tensor& y) = 0;
  // out [rows, width] (activation dtype) = the Mamba2 output norm of y [rows, width] f32 gated
  // by z (strided): norm_before_gate ? norm(y) * silu(z) : norm(y * silu(z)), RMS over `groups`
  // equal column groups times weight [width]; weight null: the gate only. `spanning.sums`: the
  // groups span tensor-parallel ranks (y holds this rank's part of each), and the RMS comes
  // from their sums of squares over every rank ([rows, groups] f32, strided) and the whole
  // group's width `spanning.width`.
  struct SpanningGroups {
    const Tensor* sums = nullptr;
    int64_t width = 0;
  };
  virtual void gated_rms_norm(const Tensor& y, const Tensor& z, const Tensor* weight, int groups,
                              float eps, bool norm_before_gate, Tensor& out,
                              SpanningGroups spanning) = 0;
  // sums [rows, groups] f32 (strided) = the sum of squares, per row and group, of what
  // gated_rms_norm normalizes (y, or y * silu(z) unless norm_before_gate): one rank's part of
  // a spanning group's, to be summed over the ranks.
  virtual void gated_sum_squares(const Tensor& y, const Tensor& z, int groups,
                                 bool norm_before_gate, Tensor& sums) = 0;

  // ---- sampling
  // ids[r] = argmax logits[r] (the first maximum), int32.
  virtual void argmax(const Tensor& logits, Tensor& ids) = 0;
  // ids[r] = the token row r of `logits` [R, V] draws under rows[r] ([R, kSamplingRowInts]
  // int32, packed SamplingRow; ops/sampling.h defines the rule every device follows).
  virtual void sample(const Tensor& logits, const Tensor& rows, Tensor& ids) = 0;
  // Applies edits ([capacity, kLogitEditInts] int32, packed LogitEdits; rows < 0 are padding)
  // to logits [R, V] in place: the requests' logit_bias, bans and penalties
  // (ops/logit_edits.h defines the rule every device follows).
  virtual void edit_logits(Tensor& logits, const Tensor& edits) = 0;
  // Bans the tokens that row rows[i] ([n] int32, -1: padding) may not draw under masks[i]
  // ([n, 2 x token_mask_words(V)] int32; ops/token_masks.h): structured output's grammars.
  virtual void mask_logits(Tensor& logits, const Tensor& rows, const Tensor& masks) = 0;
  // out [R, logprob_row_width(top_n)] f32: the log-probabilities of raw logits [R, V] at the
  // drawn ids [R] int32 and the top_n most likely tokens (ops/logprobs.h).
  virtual void logprobs(const Tensor& logits, const Tensor& ids, int top_n, Tensor& out) = 0;
};

// The reference implementation (kernels/cpu); `weight_dtype` f32 (the reference), bf16
// (weight matrices in bf16, widened as they are read: --dtype bfloat16) or Q8 (int8 with
// per-block scales, activations quantized as a product reads them: --quantization int8).
std::unique_ptr<Ops> make_cpu_ops(DType weight_dtype = DType::F32);

}  // namespace strata
