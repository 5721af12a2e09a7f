#include "runtime/model_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "kernels/cpu/threads.h"
#include "model/shard.h"
#include "models/registry.h"
#include "ops/logprobs.h"
#include "runtime/capabilities.h"

namespace strata {

namespace {

constexpr int64_t kDefaultMaxTotalTokens = 1 << 18;

// The draw of a sampled pass from its logits once edited: the grammar masks (rows < 0 of
// `mask_rows` are padding), the sample under each row's SamplingRow, and the logprobs of the
// raw logits. One definition for the draw inside a pass and the one after late masks.
void draw(Ops& ops, const PassKind& kind, const Tensor& sampling, const Tensor& raw, Tensor& edited,
          const Tensor& mask_rows, const Tensor& masks, Tensor& ids, Tensor& logprobs) {
  if (kind.mask_capacity > 0) ops.mask_logits(edited, mask_rows, masks);
  ops.sample(edited, sampling, ids);
  if (kind.top_logprobs >= 0) ops.logprobs(raw, ids, kind.top_logprobs, logprobs);
}

}  // namespace

ModelRunner::ModelRunner(const ModelConfig& config, const RunnerOptions& options)
    : config_(config), options_(options), stage_(options.stage.value_or(StagePlan::whole(config))) {
  options.validate(config);
  validate_architecture(config);
  // The ranks are processes of one MPI job (dist/pipeline_job.h): a runner made outside one has
  // no group to split over.
  if (options.tp_size > 1 && !options.tensor_parallel)
    fail(
        "--tp-size {}: this command runs in one process; tensor parallelism runs under strata "
        "generate and bench-one-batch (docs/tensor_parallel.md): leave --tp-size out here",
        options.tp_size);
  cpu::configure_threads(options.threads, cpu::parse_thread_binding(options.cpu_bind),
                         options.cpu_slot, options.cpu_slots);
  max_context_len_ = options.resolved_max_context_len(config);

#ifdef STRATA_WITH_CUDA
  if (options.device == "cuda") device_ = make_cuda_stage_device(options);
#endif
  if (!device_) device_ = make_cpu_stage_device(options.weight_dtype());
  device_->set_wait_timeout(options.device_wait_timeout_s);
  // A GPU group orders its collectives on this device's stream, staging in its workspace.
  if (options.tensor_parallel) options.tensor_parallel->bind(device_->ops(), device_->stream());

  // One loader puts the stage's own parameters on its device, in the device's dtypes.
  weights_ = open_weights(config.model_dir, options.load_format, options.seed);
  ParamLoader loader(*weights_, device_->ops(), options.load_format == LoadFormat::Dummy,
                     options.seed);
  if (options.tensor_parallel) loader.set_tensor_parallel(*options.tensor_parallel);
  // A pipeline stage or a tensor-parallel rank loads a part of the checkpoint: its progress
  // has no whole to count to.
  const bool whole_model = stage_.is_first && stage_.is_last && options.tp_size == 1;
  LoadProgress progress(fmt::format("weights (layers [{}, {}) of {})", stage_.start_layer,
                                    stage_.end_layer, config.num_layers),
                        whole_model ? weights_->total_elements() : 0);
  if (options.report_load) loader.set_progress(&progress);
  model_ = build_model(config, loader, stage_);
  if (options.report_load) progress.finish();
  weight_bytes_ = loader.bytes();
  // (Every tensor-parallel rank reads every tensor but the row-parallel biases only rank 0
  // adds: rank 0 checks that the checkpoint is used.)
  if (stage_.is_first && stage_.is_last &&
      (!options.tensor_parallel || options.tensor_parallel->rank() == 0)) {
    const auto unused = weights_->unused();
    if (!unused.empty())
      std::fprintf(stderr, "warning: %zu checkpoint tensors were not used (first: %s)\n",
                   unused.size(), unused.front().c_str());
  }

  // The recurrent-state pool first: its size is fixed by --max-mamba-cache-size, and the KV
  // pool takes what the memory budget leaves after it.
  // A pipeline stage without recurrent layers of a model that has some gets a pool without
  // layers (no memory): the slots are still taken and given back as on the other stages, so
  // that every stage's scheduler admits, checkpoints and caches alike (strata serve --pp-size).
  const auto states = model_->state_layouts();
  if (!states.empty() || !config.recurrent_layer_ids().empty()) {
    const DType ssm_dtype = parse_ssm_dtype(options.mamba_ssm_dtype);
    const int state_slots = options.mamba_state_slots();
    const size_t need = StatePool::bytes_for(states, state_slots, ssm_dtype);
    const double budget = device_->cache_budget_bytes();
    if (budget >= 0 && static_cast<double>(need) > budget)
      fail(
          "the recurrent-state cache of {} slots ({} layers, ssm {}) needs {:.2f} GiB but "
          "--mem-fraction-static {} leaves {:.2f} GiB after the weights; lower "
          "--max-mamba-cache-size (at most {}), use --mamba-ssm-dtype bfloat16, or raise "
          "--mem-fraction-static",
          state_slots, states.size(), dtype_name(ssm_dtype), need / double(1 << 30),
          options.mem_fraction_static, std::max(budget, 0.0) / double(1 << 30),
          static_cast<int64_t>(std::max(budget, 0.0) /
                               std::max<double>(1.0, StatePool::bytes_for(states, 1, ssm_dtype))));
    state_pool_ = std::make_unique<StatePool>(states, state_slots, ssm_dtype, &device_->ops());
  }

  const auto layouts = model_->kv_layouts();
  const int64_t natural_slots = std::min<int64_t>(
      int64_t{options.max_running_requests} * max_context_len_, kDefaultMaxTotalTokens);
  // With a window space, the sliding layers' rows are sized first and the full layers take
  // what the budget leaves; a window space no smaller than the full one is dropped.
  WindowSpace window = options.window_space(layouts, max_context_len_, natural_slots);
  // Ranks that share a GPU size their caches from its free memory once every rank's weights
  // and state pool are resident (the first agreement is that barrier); then all take the
  // smallest plan, so that their schedulers admit, retract and cache alike.
  Communicator* group = options.tensor_parallel;
  if (group) group->min_over_ranks(0);
  int64_t slots =
      device_->plan_kv_slots(layouts, options.max_total_tokens, natural_slots, window.num_slots);
  if (group) slots = group->min_over_ranks(slots);
  if (window.num_slots > 0 && window.num_slots >= slots) {
    window = {};
    slots = device_->plan_kv_slots(layouts, options.max_total_tokens, natural_slots, 0);
    if (group) slots = group->min_over_ranks(slots);
  }
  memory_ = std::make_unique<TokenMemory>(options.max_running_requests, max_context_len_, slots,
                                          options.page_size, window);
  device_->attach(layouts, *memory_);
  mamba_strategy_ = options.resolved_mamba_strategy();
  if (stage_.is_last) {
    // The buffers of draws after late grammar masks, at their largest now: growing one later
    // would drop every captured graph.
    const int rows = options.max_running_requests, cap = token_mask_capacity(rows);
    device_->persistent("late_mask_rows", {cap}, DType::I32);
    device_->persistent("late_masks", {cap, 2 * token_mask_words(config.vocab_size)}, DType::I32);
    device_->persistent("late_ids", {rows}, DType::I32);
    device_->persistent("late_logprobs", {rows, logprob_row_width(kMaxTopLogprobs)}, DType::F32);
  }
}

ModelRunner::~ModelRunner() = default;

std::vector<std::string> ModelRunner::startup_report(int pp_size) const {
  // As the pool holds them: a device stores KV in its own dtype (bf16 on cuda), not the
  // model's f32 layouts.
  auto layouts = model_->kv_layouts();
  if (KVPool* pool = device_->kv_pool())
    for (int id : pool->layer_ids()) layouts.at(id) = pool->layout(id);
  const std::string kv_dtype = layouts.empty() ? "-" : dtype_name(layouts.begin()->second.dtype);
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "configuration: model {}, {}, device {} ({}), weights {}, KV cache {}, page size {}, "
      "context length {}, max running requests {}, pp {} (this stage: layers [{}, {}) of {}), "
      "tp {} (this rank: {})",
      config_.model_dir, config_.architecture, options_.device, device_->describe(),
      dtype_name(device_->ops().weight_dtype()), kv_dtype, options_.page_size, max_context_len_,
      options_.max_running_requests, pp_size, stage_.start_layer, stage_.end_layer,
      config_.num_layers, options_.tp_size,
      options_.tensor_parallel ? options_.tensor_parallel->rank() : 0));
  // The KV pool's bytes, grouped by layer layout (full attention, sliding, MLA latent, ...);
  // with a window space the sliding layers' rows are its slots, not the full space's.
  const bool windowed = memory_->has_window_space();
  const auto window_layers =
      windowed ? KVPool::in_space(layouts, /*window=*/true) : std::map<int, KVLayerLayout>();
  struct Kind {
    int layers = 0;
    size_t bytes_per_token = 0;
    int64_t slots = 0;
  };
  std::map<std::string, Kind> kinds;
  for (const auto& [layer, l] : layouts) {
    const bool in_window = window_layers.count(layer) > 0;
    Kind& k = kinds[l.describe() + (in_window ? " in the window space" : "")];
    ++k.layers;
    k.bytes_per_token += l.bytes_per_slot();
    k.slots =
        in_window ? memory_->window_allocator().num_slots() : memory_->allocator().num_slots();
  }
  std::string kv;
  size_t kv_bytes = 0;
  for (const auto& [what, k] : kinds) {
    const size_t bytes = k.bytes_per_token * static_cast<size_t>(k.slots);
    kv += fmt::format("; {} layers of {}: {} B/token, {}", k.layers, what, k.bytes_per_token,
                      human_bytes(static_cast<double>(bytes)));
    kv_bytes += bytes;
  }
  if (windowed)
    kv += fmt::format("; window space of {} slots for the sliding layers' last {} positions",
                      memory_->window_allocator().num_slots(), memory_->window());
  const std::string states =
      state_pool_
          ? fmt::format(
                ", state pool {} slots ({} layers, ssm {}) {}", state_pool_->num_slots(),
                model_->state_layouts().size(), dtype_name(state_pool_->ssm_dtype()),
                human_bytes(static_cast<double>(StatePool::bytes_for(
                    model_->state_layouts(), state_pool_->num_slots(), state_pool_->ssm_dtype()))))
          : "";
  // What is left: under --mem-fraction-static on a GPU, the host's available memory on the CPU.
  const double budget = device_->cache_budget_bytes();
  const double host_free =
      static_cast<double>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  const std::string left = budget >= 0
                               ? fmt::format("{} left under --mem-fraction-static {}",
                                             human_bytes(budget), options_.mem_fraction_static)
                               : fmt::format("host memory available {}", human_bytes(host_free));
  lines.push_back(
      fmt::format("memory plan: weights {}; KV pool {} tokens ({} pages of {}) {}{}{}; {}",
                  human_bytes(static_cast<double>(weight_bytes_)),
                  memory_->allocator().usable_pages() * memory_->allocator().page_size(),
                  memory_->allocator().usable_pages(), memory_->allocator().page_size(),
                  human_bytes(static_cast<double>(kv_bytes)), kv, states, left));
  return lines;
}

std::string ModelRunner::describe() const {
  const std::string window =
      memory_->has_window_space()
          ? fmt::format(" (+ {} window slots for the sliding layers' last {} positions)",
                        memory_->window_allocator().num_slots(), memory_->window())
          : "";
  return fmt::format("{}: layers [{}, {}) of {}, {:.2f} GiB of weights, {} KV slots{}",
                     device_->describe(), stage_.start_layer, stage_.end_layer, config_.num_layers,
                     weight_bytes_ / double(1 << 30), memory_->allocator().num_slots(), window);
}

PassOutput ModelRunner::run_pass(const ForwardBatch& batch, const PassKind& kind) {
  device_->stage(batch);
  const Tensor hidden_in =
      stage_.is_first
          ? Tensor{}
          : device_->persistent("stage_in", {batch.num_tokens(), config_.hidden_size}, DType::F32);
  STRATA_CHECK(batch.sampling.empty() || batch.sampling.size() == batch.req_pool_indices.size(),
               "{} sampling rows for {} requests", batch.sampling.size(), batch.batch_size());
  // (A pipeline stage before the last computes no logits: its pass is the hidden state only.)
  STRATA_CHECK(
      batch.logits_rows.empty() || !stage_.is_last || (kind.sampled && batch.return_all_logits),
      "logits rows are for sampled passes that compute every row");
  return device_->run(batch, kind, [&](ForwardContext& ctx) {
    ctx.recurrent_state = state_pool_.get();
    Ops& ops = *ctx.ops;
    Tensor out = model_->forward(batch, ctx, hidden_in);
    PassOutput result;
    if (!stage_.is_last) {
      Tensor dst = device_->persistent("stage_out", {out.rows(), out.cols()}, DType::F32);
      ops.copy(out, dst);
      return result;
    }
    result.logits = out;
    if (!kind.sampled) return result;
    if (batch.return_all_logits) {
      // Every token's row is kept for the rows asked for; the draw reads each request's last.
      result.all_logits = out;
      out = ops.empty({batch.batch_size(), out.cols()}, DType::F32);
      ops.gather_rows(result.all_logits, ctx.last_token_rows, out);
      result.logits = out;
    }
    // The draw reads the edited logits; logprobs and raw rows the model's own.
    Tensor drawn_from = out;
    if (kind.keep_raw) {
      drawn_from = ops.empty({out.rows(), out.cols()}, DType::F32);
      ops.copy(out, drawn_from);
    }
    if (kind.edit_capacity > 0) ops.edit_logits(drawn_from, ctx.logit_edits);
    if (kind.late_masks) {
      result.edited = drawn_from;
      return result;
    }
    result.ids = ops.empty({out.rows()}, DType::I32);
    if (kind.top_logprobs >= 0)
      result.logprobs = ops.empty({out.rows(), logprob_row_width(kind.top_logprobs)}, DType::F32);
    draw(ops, kind, ctx.sampling, out, drawn_from, ctx.mask_rows, ctx.token_masks, result.ids,
         result.logprobs);
    return result;
  });
}

Tensor ModelRunner::forward(const ForwardBatch& batch, const Tensor& hidden_in) {
  if (!stage_.is_first) {
    STRATA_CHECK(hidden_in.rows() == batch.num_tokens(), "stage input {} for {} tokens",
                 hidden_in.describe(), batch.num_tokens());
    Tensor in = device_->persistent("stage_in", {hidden_in.rows(), hidden_in.cols()}, DType::F32);
    // What forward() of the stage before returned: host memory, whatever device runs here.
    Ops& ops = device_->ops();
    ops.copy(hidden_in.device() == ops.device() ? hidden_in : ops.upload(hidden_in, DType::F32),
             in);
  }
  PassOutput out = run_pass(batch, PassKind::logits());
  if (stage_.is_last) return device_->to_host(out.logits);
  stage_tokens_ = batch.num_tokens();
  const TensorRef hidden = stage_output();
  return device_->to_host(
      Tensor::view(hidden.data, hidden.shape, DType::F32, device_->ops().device()));
}

ModelRunner::SampledTokens ModelRunner::bring_back(const ForwardBatch& batch,
                                                   const PassOutput& out) {
  SampledTokens s;
  s.ids = device_->ids_to_host(out.ids);
  if (!out.logprobs.empty()) {
    const Tensor lp = device_->to_host(out.logprobs);
    s.logprobs.assign(lp.ptr<float>(), lp.ptr<float>() + lp.numel());
  }
  auto rows_to_host = [this](const Tensor& logits, const std::vector<int32_t>& rows) {
    std::vector<std::vector<float>> back;
    for (int32_t r : rows) {
      STRATA_CHECK(r >= 0 && r < logits.rows(), "logits row {} of {}", r, logits.rows());
      const Tensor row = device_->to_host(
          Tensor::view(static_cast<char*>(logits.raw()) + r * logits.row_stride() * sizeof(float),
                       {1, logits.cols()}, DType::F32, logits.device()));
      back.emplace_back(row.ptr<float>(), row.ptr<float>() + row.numel());
    }
    return back;
  };
  s.raw_logits = rows_to_host(out.logits, batch.raw_logit_rows);
  if (!batch.logits_rows.empty()) s.token_logits = rows_to_host(out.all_logits, batch.logits_rows);
  return s;
}

ModelRunner::SampledTokens ModelRunner::forward_sampled(const ForwardBatch& batch) {
  STRATA_CHECK(batch.top_logprobs <= kMaxTopLogprobs, "top_logprobs {} over {}", batch.top_logprobs,
               kMaxTopLogprobs);
  return bring_back(batch, run_pass(batch, PassKind::sampled_for(batch)));
}

ModelRunner::SampledTokens ModelRunner::forward_sampled(const ForwardBatch& batch,
                                                        const LateMasks& late) {
  if (late.rows.empty()) return forward_sampled(batch);
  STRATA_CHECK(batch.mask_rows.empty() && stage_.is_last,
               "late grammar masks for a pass that has its own, or on a stage before the last");
  STRATA_CHECK(batch.top_logprobs <= kMaxTopLogprobs, "top_logprobs {} over {}", batch.top_logprobs,
               kMaxTopLogprobs);
  const PassKind kind = PassKind::sampled_for(batch, static_cast<int>(late.rows.size()));
  // Queued (GPU) or done (host): either way the masks were being computed meanwhile.
  const PassOutput forward = run_pass(batch, kind);
  const std::vector<uint64_t>& masks = late.wait();
  const int64_t words = token_mask_words(config_.vocab_size);
  STRATA_CHECK(masks.size() == late.rows.size() * static_cast<size_t>(words),
               "{} mask words for {} rows of {} words", masks.size(), late.rows.size(), words);
  const int rows = batch.batch_size();
  const int max_rows = options_.max_running_requests;
  STRATA_CHECK(rows <= max_rows, "a sampled pass of {} rows, over {}", rows, max_rows);
  const int cap = kind.mask_capacity;
  const int max_cap = token_mask_capacity(max_rows);
  std::vector<int32_t> host_rows(cap), host_masks(static_cast<size_t>(cap) * 2 * words);
  ForwardBatch::pack_masks(late.rows, masks, host_rows.data(), host_masks.data(), cap);
  Tensor mask_rows = fixed_buffer("late_mask_rows", {cap}, {max_cap}, DType::I32);
  Tensor mask_bits = fixed_buffer("late_masks", {cap, 2 * words}, {max_cap, 2 * words}, DType::I32);
  device_->write(Tensor::view(host_rows.data(), {cap}, DType::I32, Device::host()), mask_rows);
  device_->write(Tensor::view(host_masks.data(), {cap, 2 * words}, DType::I32, Device::host()),
                 mask_bits);
  const int width = logprob_row_width(std::max(kind.top_logprobs, 0));
  const int max_width = logprob_row_width(kMaxTopLogprobs);
  return bring_back(batch, device_->continue_pass(batch, [&](ForwardContext& ctx) {
    PassOutput out = forward;
    out.ids = fixed_buffer("late_ids", {rows}, {max_rows}, DType::I32);
    if (kind.top_logprobs >= 0)
      out.logprobs =
          fixed_buffer("late_logprobs", {rows, width}, {max_rows, max_width}, DType::F32);
    draw(*ctx.ops, kind, ctx.sampling, forward.logits, out.edited, mask_rows, mask_bits, out.ids,
         out.logprobs);
    return out;
  }));
}

Tensor ModelRunner::fixed_buffer(const std::string& slot, std::vector<int64_t> shape,
                                 std::vector<int64_t> largest, DType dtype) {
  const Tensor whole = device_->persistent(slot, std::move(largest), dtype);
  const Tensor want = Tensor::view(nullptr, shape, dtype, whole.device());
  STRATA_CHECK(want.numel() <= whole.numel(), "{} over the largest {}", want.describe(),
               whole.describe());
  return Tensor::view(whole.raw(), std::move(shape), dtype, whole.device(), whole.owner());
}

TensorRef ModelRunner::stage_input(int num_tokens) {
  STRATA_CHECK(!stage_.is_first, "the first stage embeds its tokens: it takes no input");
  Tensor t = device_->persistent("stage_in", {num_tokens, config_.hidden_size}, DType::F32);
  return {t.ptr<float>(), t.shape(), device_->memory_kind()};
}

ModelRunner::StageResult ModelRunner::forward_stage(const ForwardBatch& batch, bool sampled) {
  StageResult result;
  PassOutput out = run_pass(
      batch, sampled && stage_.is_last ? PassKind::sampled_for(batch) : PassKind::logits());
  stage_tokens_ = batch.num_tokens();
  if (!stage_.is_last) return result;  // queued; the hidden state is in stage_output()
  if (sampled)
    result.sampled = bring_back(batch, out);
  else
    result.logits = device_->to_host(out.logits);
  return result;
}

TensorRef ModelRunner::stage_output() {
  STRATA_CHECK(!stage_.is_last && stage_tokens_ > 0, "no hidden state to hand on");
  Tensor t = device_->persistent("stage_out", {stage_tokens_, config_.hidden_size}, DType::F32);
  return {t.ptr<float>(), t.shape(), device_->memory_kind()};
}

void ModelRunner::reserve(int max_tokens, int max_batch) {
  if (!stage_.is_first)
    device_->persistent("stage_in", {max_tokens, config_.hidden_size}, DType::F32);
  if (!stage_.is_last)
    device_->persistent("stage_out", {max_tokens, config_.hidden_size}, DType::F32);
  if (device_->memory_kind() == Memory::Host) return;  // host passes allocate as they go
  // Device workspaces settle at the high-water mark of the passes they serve: run the largest
  // extend and the largest decode once, on dummy tokens written to slot 0 (the dummy slot).
  const int tokens = std::max(1, std::min(max_tokens, max_context_len_));
  ForwardBatch extend;
  extend.req_pool_indices = {0};
  extend.prefix_lens = {0};
  extend.extend_lens = {tokens};
  extend.state_slots = {0};
  extend.input_ids.assign(tokens, 0);
  extend.out_cache_loc.assign(tokens, 0);
  for (int i = 0; i < tokens; ++i) extend.positions.push_back(i);
  ForwardBatch decode;
  decode.mode = ForwardMode::Decode;
  const int batch = std::max(1, std::min(max_batch, options_.max_running_requests));
  decode.req_pool_indices.assign(batch, 0);
  decode.prefix_lens.assign(batch, 0);
  decode.extend_lens.assign(batch, 1);
  decode.state_slots.assign(batch, 0);
  decode.input_ids.assign(batch, 0);
  decode.out_cache_loc.assign(batch, 0);
  decode.positions.assign(batch, 0);
  for (const ForwardBatch* b : {&extend, &decode})
    for (bool sampled : {false, true}) {
      if (sampled && !stage_.is_last) continue;
      PassOutput out = run_pass(*b, sampled ? PassKind::sampled_for(*b) : PassKind::logits());
      if (stage_.is_last && sampled) device_->ids_to_host(out.ids);  // waits for the pass
    }
  device_->finish_reserve();
}

#ifndef STRATA_WITH_CUDA
int cuda_device_count() {
  return 0;
}

bool cuda_available(std::string* why) {
  if (why) *why = "this build of strata has no CUDA backend (configure with -DSTRATA_CUDA=ON)";
  return false;
}
#endif

}  // namespace strata
