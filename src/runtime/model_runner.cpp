#include "runtime/model_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "models/registry.h"
#include "runtime/capabilities.h"

namespace strata {

namespace {

constexpr int64_t kDefaultMaxTotalTokens = 1 << 18;

std::vector<int32_t> argmax_rows(const Tensor& logits) {
  std::vector<int32_t> ids(logits.dim(0));
  const int64_t vocab = logits.dim(1);
  for (int64_t r = 0; r < logits.dim(0); ++r)
    ids[r] = static_cast<int32_t>(std::max_element(logits.row(r), logits.row(r) + vocab) -
                                  logits.row(r));
  return ids;
}

}  // namespace

void RunnerOptions::validate(const ModelConfig& config) const {
  const std::vector<std::string> found = problems(config);
  if (!found.empty()) fail("invalid configuration:\n  - {}", fmt::join(found, "\n  - "));
}

std::vector<std::string> RunnerOptions::problems(const ModelConfig& config) const {
  std::vector<std::string> problems;
  if (page_size < 1)
    problems.push_back(fmt::format("--page-size must be at least 1, got {}", page_size));
  if (device != "cpu" && device != "cuda")
    problems.push_back(fmt::format("--device '{}' is unknown: use cpu or cuda", device));
  if (device == "cuda") {
#ifdef STRATA_WITH_CUDA
    for (auto& p : cuda_configuration_problems(config, *this)) problems.push_back(std::move(p));
#else
    problems.push_back(
        "--device cuda: this build of strata has no CUDA backend; rebuild with "
        "-DSTRATA_CUDA=ON on a machine with the CUDA toolkit, or use --device cpu");
#endif
  }
  if (gpu_id < 0)
    problems.push_back(fmt::format("--base-gpu-id must be at least 0, got {}", gpu_id));
  else if (device == "cpu" && gpu_id != 0)
    problems.push_back(
        fmt::format("--base-gpu-id {} picks a GPU, but --device is cpu: add --device cuda or leave "
                    "--base-gpu-id out",
                    gpu_id));
  if (device == "cpu" && attention_backend != "auto" && attention_backend != "cpu")
    problems.push_back(
        fmt::format("--attention-backend '{}' is not available on {}: use auto or cpu",
                    attention_backend, device));
  if (max_running_requests < 1)
    problems.push_back(
        fmt::format("--max-running-requests must be at least 1, got {}", max_running_requests));
  if (max_context_len < 0) problems.push_back("--context-length must be positive");
  if (max_total_tokens < 0) problems.push_back("--max-total-tokens must be positive");
  if (stage && (stage->start_layer < 0 || stage->end_layer > config.num_layers ||
                stage->start_layer > stage->end_layer))
    problems.push_back(fmt::format("stage layers [{}, {}) do not fit a model of {} layers",
                                   stage->start_layer, stage->end_layer, config.num_layers));
  if (max_mamba_cache_size < 0)
    problems.push_back(
        fmt::format("--max-mamba-cache-size must be positive, got {}", max_mamba_cache_size));
  try {
    parse_ssm_dtype(mamba_ssm_dtype);
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  // The Mamba cache flags matter only for models with recurrent layers; a typo is an error
  // for every model.
  const bool hybrid = !config.recurrent_layer_ids().empty();
  const std::string strategy_feature = "mamba_radix_cache_strategy";
  if (auto p = check_capability_value(strategy_feature, mamba_radix_cache_strategy)) {
    problems.push_back(*p);
  } else if (hybrid) {
    if (auto q = check_capability(strategy_feature, mamba_radix_cache_strategy, device))
      problems.push_back(*q);
  }
  if (mamba_track_interval < 1)
    problems.push_back(fmt::format(
        "--mamba-track-interval must be a positive multiple of --page-size ({}), got {}", page_size,
        mamba_track_interval));
  else if (radix_cache && hybrid && page_size >= 1 && resolved_mamba_strategy() == "extra_buffer" &&
           mamba_track_interval % page_size != 0)
    problems.push_back(fmt::format(
        "--mamba-track-interval {} is not a multiple of --page-size {}: state checkpoints must "
        "fall on page boundaries of the prefix cache; use {} or {}",
        mamba_track_interval, page_size,
        std::max(page_size, mamba_track_interval / page_size * page_size),
        (mamba_track_interval / page_size + 1) * page_size));
  return problems;
}

int RunnerOptions::mamba_state_slots() const {
  if (max_mamba_cache_size > 0) return max_mamba_cache_size;
  return max_running_requests * (radix_cache ? 2 : 1);
}

std::string RunnerOptions::resolved_mamba_strategy() const {
  return resolve_capability("mamba_radix_cache_strategy", mamba_radix_cache_strategy, device);
}

int RunnerOptions::resolved_max_context_len(const ModelConfig& config) const {
  return max_context_len > 0                  ? max_context_len
         : config.max_position_embeddings > 0 ? config.max_position_embeddings
                                              : 32768;
}

ModelRunner::ModelRunner(const ModelConfig& config, const RunnerOptions& options)
    : config_(config), options_(options), stage_(options.stage.value_or(StagePlan::whole(config))) {
  options.validate(config);
  validate_architecture(config);
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu::set_num_threads(threads);

  max_context_len_ = options.resolved_max_context_len(config);
  const StagePlan& stage = stage_;
  const int64_t natural_slots = std::min<int64_t>(
      int64_t{options.max_running_requests} * max_context_len_, kDefaultMaxTotalTokens);
#ifdef STRATA_WITH_CUDA
  if (options.device == "cuda") {
    // The device executor owns weights, KV pool and backend; the host keeps the token memory.
    executor_ = make_cuda_executor(config, options);
    const int64_t slots = executor_->plan_kv_slots(options.max_total_tokens, natural_slots);
    memory_ = std::make_unique<TokenMemory>(options.max_running_requests, max_context_len_, slots,
                                            options.page_size);
    executor_->attach(*memory_);
    return;
  }
#endif
  ops_ = make_cpu_ops();
  weights_ = open_weights(config.model_dir, options.load_format, options.seed);
  ParamLoader loader(*weights_, *ops_, options.load_format == LoadFormat::Dummy, options.seed);
  model_ = build_model(config, loader, stage);
  if (stage.is_first && stage.is_last) {
    const auto unused = weights_->unused();
    if (!unused.empty())
      std::fprintf(stderr, "warning: %zu checkpoint tensors were not used (first: %s)\n",
                   unused.size(), unused.front().c_str());
  }

  const int64_t slots = options.max_total_tokens > 0 ? options.max_total_tokens : natural_slots;
  memory_ = std::make_unique<TokenMemory>(options.max_running_requests, max_context_len_, slots,
                                          options.page_size);
  const auto layouts = model_->kv_layouts();
  if (!layouts.empty()) {
    kv_pool_ = std::make_unique<KVPool>(layouts, memory_->allocator().num_slots());
    attention_ = make_cpu_attention_backend(kv_pool_.get(), &memory_->req_to_token());
  }
  const auto states = model_->state_layouts();
  if (!states.empty()) {
    state_pool_ = std::make_unique<StatePool>(states, options.mamba_state_slots(),
                                              parse_ssm_dtype(options.mamba_ssm_dtype));
  }
  mamba_strategy_ = options.resolved_mamba_strategy();
}

ModelRunner::~ModelRunner() = default;

Tensor ModelRunner::forward(const ForwardBatch& batch, const Tensor& hidden_in) {
  if (executor_) return executor_->forward(batch);
  if (attention_) attention_->prepare(batch);
  ForwardContext ctx;
  ctx.ops = ops_.get();
  // Host views of the batch's arrays: the CPU ops read them where they are.
  auto ints = [](const std::vector<int32_t>& v) {
    return Tensor::view(const_cast<int32_t*>(v.data()), {static_cast<int64_t>(v.size())},
                        DType::I32, Device::host());
  };
  ctx.input_ids = ints(batch.input_ids);
  ctx.positions = ints(batch.positions);
  std::vector<int32_t> last_rows(batch.batch_size());
  const std::vector<int> offsets = batch.token_offsets();
  for (int b = 0; b < batch.batch_size(); ++b) last_rows[b] = offsets[b + 1] - 1;
  ctx.last_token_rows = ints(last_rows);
  ctx.attention = attention_.get();
  ctx.recurrent_state = state_pool_.get();
  return model_->forward(batch, ctx, hidden_in);
}

std::vector<int32_t> ModelRunner::forward_greedy(const ForwardBatch& batch) {
  if (executor_) return executor_->forward_greedy(batch);
  return argmax_rows(forward(batch));
}

TensorRef ModelRunner::stage_input(int num_tokens) {
  if (executor_) return executor_->stage_input(num_tokens);
  STRATA_CHECK(!stage_.is_first, "the first stage embeds its tokens: it takes no input");
  const std::vector<int64_t> shape = {num_tokens, config_.hidden_size};
  if (stage_in_.shape() != shape) stage_in_ = Tensor(shape);
  return TensorRef::host(stage_in_);
}

ModelRunner::StageResult ModelRunner::forward_stage(const ForwardBatch& batch, bool greedy) {
  StageResult result;
  if (executor_) {
    if (!stage_.is_last)
      executor_->forward_hidden(batch);
    else if (greedy)
      result.ids = executor_->forward_greedy(batch);
    else
      result.logits = executor_->forward(batch);
    return result;
  }
  Tensor out = forward(batch, stage_.is_first ? Tensor{} : stage_in_);
  if (!stage_.is_last) {
    stage_out_ = std::move(out);
  } else if (greedy) {
    result.ids = argmax_rows(out);
  } else {
    result.logits = std::move(out);
  }
  return result;
}

TensorRef ModelRunner::stage_output() {
  if (executor_) return executor_->stage_output();
  STRATA_CHECK(!stage_.is_last && !stage_out_.empty(), "no hidden state to hand on");
  return TensorRef::host(stage_out_);
}

void ModelRunner::reserve(int max_tokens, int max_batch) {
  if (executor_) executor_->reserve(max_tokens, max_batch);
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
