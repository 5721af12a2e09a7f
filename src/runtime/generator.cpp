#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/error.h"
#include "runtime/scheduler.h"

namespace strata {

void validate_requests(const ModelConfig& config, int max_context_len,
                       const std::vector<GenerateRequest>& requests) {
  const int vocab = config.vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    if (r.input_ids.empty())
      throw RequestError(fmt::format("prompt {} is empty: give at least one input id", i));
    for (size_t j = 0; j < r.input_ids.size(); ++j)
      if (r.input_ids[j] < 0 || r.input_ids[j] >= vocab)
        throw RequestError(
            fmt::format("prompt {}: input id {} at position {} is outside the "
                        "vocabulary (valid ids are 0..{})",
                        i, r.input_ids[j], j, vocab - 1));
    r.sampling.validate();
    const int64_t total = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
    if (total > max_context_len)
      throw RequestError(
          fmt::format("prompt {}: {} prompt tokens + {} new tokens exceed the context "
                      "length {}; shorten the prompt or lower --max-new-tokens",
                      i, r.input_ids.size(), r.sampling.max_new_tokens, max_context_len));
  }
}

int64_t kv_slots_needed(const std::vector<GenerateRequest>& requests, int page_size) {
  int64_t slots = 0;
  for (const auto& r : requests) {
    const int64_t len = static_cast<int64_t>(r.input_ids.size()) + r.sampling.max_new_tokens;
    slots += (len + page_size - 1) / page_size * page_size;
  }
  return std::max<int64_t>(slots, page_size);
}

namespace {

ServeRequest serve_request(const GenerateRequest& g, const GenerateOptions& options) {
  ServeRequest q;
  q.input_ids = g.input_ids;
  q.sampling = g.sampling;
  q.return_logits = options.return_logits;
  // Scoring: the logprob of every prompt token after the first.
  if (options.return_input_logprobs && g.input_ids.size() > 1) q.prompt_logprobs_from = 1;
  return q;
}

// The largest pass a pipeline's stages size their buffers for before the first hand-over: at
// most 1/M of the requests (Scheduler::build_batch), each with its first prompt piece (later
// pieces and decode steps are no larger).
std::pair<int, int> largest_pass(const std::vector<GenerateRequest>& requests, int micro_batches,
                                 int chunk) {
  const int n = static_cast<int>(requests.size());
  const int batch = std::max(1, (n + micro_batches - 1) / micro_batches);
  std::vector<int> lens;
  for (const auto& r : requests) lens.push_back(static_cast<int>(r.input_ids.size()));
  std::sort(lens.begin(), lens.end(), std::greater<>());
  int64_t tokens = 0;
  for (int i = 0; i < std::min(batch, n); ++i) tokens += lens[i];
  if (chunk > 0) tokens = std::min<int64_t>(tokens, chunk);
  return {static_cast<int>(std::max<int64_t>(tokens, 1)), batch};
}

}  // namespace

std::vector<GenerateOutput> generate(ModelRunner& runner,
                                     const std::vector<GenerateRequest>& requests,
                                     const GenerateOptions& options, GenerateStats* stats,
                                     Transport* pipeline) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  SchedulerOptions so;
  so.chunked_prefill_size = options.chunked_prefill_size;
  // Each prompt is computed whole, as given (a generate call is one batch, not a session).
  so.disable_radix_cache = true;
  so.eos_token_ids = runner.config().eos_token_ids;
  so.overlap_grammar_masks = false;  // no grammars offline: no mask thread
  so.micro_batches =
      options.micro_batches > 0 ? options.micro_batches : (pipeline ? pipeline->size() : 1);
  Scheduler scheduler(runner, so);
  if (pipeline) {
    const StagePlan& stage = runner.stage();
    const int rank = pipeline->rank(), last = pipeline->size() - 1;
    STRATA_CHECK(stage.is_first == (rank == 0) && stage.is_last == (rank == last),
                 "stage [{}, {}) runs as process {} of {}", stage.start_layer, stage.end_layer,
                 rank, last + 1);
    if (pipeline->memory() != runner.memory_kind())
      fail("the {} transport carries tensors in {}, but this stage computes in {}",
           pipeline->name(), to_string(pipeline->memory()), to_string(runner.memory_kind()));
    scheduler.set_pipeline(pipeline, last);  // the last stage prints
    const auto [max_tokens, max_batch] =
        largest_pass(requests, so.micro_batches, options.chunked_prefill_size);
    runner.reserve(max_tokens, max_batch);
    pipeline->reserve(int64_t{max_tokens} * runner.config().hidden_size, max_batch);
  }
  // The prompts are one batch: every one gets its request row (and recurrent-state slot) at
  // once, or the call is refused whole, taking nothing (KV pages may run short: the scheduler
  // then retracts and resumes, as under serve).
  const auto n = static_cast<int64_t>(requests.size());
  if (n > runner.memory().req_to_token().available())
    throw RequestError(fmt::format("{} prompts exceed --max-running-requests {}", n,
                                   runner.memory().req_to_token().max_requests()));
  if (runner.state_pool() && n > runner.state_pool()->available())
    throw RequestError(fmt::format(
        "{} prompts need a recurrent-state slot each, and {} of the {} slots are free "
        "(--max-mamba-cache-size {}); raise --max-mamba-cache-size or give fewer prompts",
        n, runner.state_pool()->available(), runner.state_pool()->num_slots(),
        runner.state_pool()->num_slots()));
  for (size_t i = 0; i < requests.size(); ++i) {
    ServeRequest q = serve_request(requests[i], options);
    try {
      scheduler.validate(q);
    } catch (const RequestError& e) {
      throw RequestError(fmt::format("prompt {}: {}", i, e.what()));
    }
    scheduler.submit(i, std::move(q));
  }

  std::vector<GenerateOutput> outputs(requests.size());
  // Timing: prefill is over once every request has its first token (or is done); the tokens
  // drawn after that are decode tokens.
  std::vector<Clock::time_point> last_token(requests.size());
  std::vector<bool> started(requests.size(), false);
  size_t waiting_first = requests.size();
  bool prefill_over = requests.empty();
  Clock::time_point prefilled = start;
  int64_t decode_tokens = 0;
  std::vector<double> intervals;
  while (scheduler.has_work()) {
    const std::vector<RequestOutput> step = scheduler.step();
    const auto now = Clock::now();
    for (const RequestOutput& o : step) {
      const size_t i = o.id;
      GenerateOutput& out = outputs[i];
      if (o.finish_reason == "error") throw RequestError(fmt::format("prompt {}: {}", i, o.error));
      for (int token : o.token_ids) {
        out.output_ids.push_back(token);
        if (prefill_over) {
          ++decode_tokens;
          if (last_token[i] != Clock::time_point{})
            intervals.push_back(std::chrono::duration<double>(now - last_token[i]).count());
        }
        last_token[i] = now;
      }
      for (const auto& row : o.logits) out.logits.push_back(row);
      for (const TokenLogprob& lp : o.prompt_logprobs) out.input_logprobs.push_back(lp.logprob);
      if (o.finished) out.finish_reason = o.finish_reason;
      if (!started[i] && (o.finished || !o.token_ids.empty())) {
        started[i] = true;
        --waiting_first;
      }
    }
    if (!prefill_over && waiting_first == 0) {
      prefill_over = true;
      prefilled = now;
    }
  }
  const auto end = Clock::now();
  double flush_s = 0;
  if (pipeline) {
    pipeline->flush();
    flush_s = std::chrono::duration<double>(Clock::now() - end).count();
  }
  if (stats) {
    *stats = GenerateStats{};
    stats->prefill_s = std::chrono::duration<double>(prefilled - start).count();
    stats->decode_s = std::chrono::duration<double>(end - prefilled).count();
    stats->decode_tokens = decode_tokens;
    stats->wait_s = scheduler.stats().pipeline_wait_s + flush_s;
    if (!intervals.empty()) {
      std::nth_element(intervals.begin(), intervals.begin() + intervals.size() / 2,
                       intervals.end());
      stats->itl_median_s = intervals[intervals.size() / 2];
    }
  }
  return outputs;
}

}  // namespace strata
