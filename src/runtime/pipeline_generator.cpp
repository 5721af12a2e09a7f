#include "runtime/pipeline_generator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "core/error.h"
#include "runtime/generation_state.h"
#include "runtime/pipeline_pass.h"

namespace strata {

namespace {

// The largest pass of any micro-batch: every member's first prompt piece (later pieces and
// decode steps are no larger). Stages size their buffers for it before the first hand-over.
std::pair<int, int> largest_pass(const std::vector<GenerateRequest>& requests,
                                 const std::vector<std::vector<int>>& groups, int chunk) {
  int max_tokens = 1, max_batch = 1;
  for (const auto& group : groups) {
    int tokens = 0;
    for (int i : group) {
      const int len = static_cast<int>(requests[i].input_ids.size());
      tokens += chunk > 0 ? std::min(len, chunk) : len;
    }
    max_tokens = std::max(max_tokens, tokens);
    max_batch = std::max(max_batch, static_cast<int>(group.size()));
  }
  return {max_tokens, max_batch};
}

}  // namespace

std::vector<GenerateOutput> generate_pipelined(ModelRunner& runner, Transport& transport,
                                               const std::vector<GenerateRequest>& requests,
                                               const GenerateOptions& options,
                                               GenerateStats* stats) {
  validate_requests(runner, requests);
  const StagePlan& stage = runner.stage();
  const int rank = transport.rank(), last = transport.size() - 1;
  STRATA_CHECK(stage.is_first == (rank == 0) && stage.is_last == (rank == last),
               "stage [{}, {}) runs as process {} of {}", stage.start_layer, stage.end_layer, rank,
               last + 1);
  if (transport.memory() != runner.memory_kind())
    fail("the {} transport carries tensors in {}, but this stage computes in {}", transport.name(),
         to_string(transport.memory()), to_string(runner.memory_kind()));
  GenerationState state(runner.config(), runner.memory(), runner.state_pool(), requests, options);
  const auto groups = split_into_micro_batches(
      static_cast<int>(requests.size()),
      options.micro_batches > 0 ? options.micro_batches : transport.size());
  const auto [max_tokens, max_batch] = largest_pass(requests, groups, options.chunked_prefill_size);
  runner.reserve(max_tokens, max_batch);
  transport.reserve(int64_t{max_tokens} * runner.config().hidden_size, max_batch);
  // Without logits returned, the last stage draws each request's token where its logits are
  // (on a GPU: no logits copied back), as generate() does.
  const bool on_device = !options.return_logits && !options.return_input_logprobs;
  // A micro-batch whose ids this stage still has to receive from the last stage.
  std::vector<std::vector<int>> awaiting(groups.size());
  std::vector<int> members;
  // Time spent in the transport: waiting for the neighbours, i.e. the pipeline's bubbles.
  // (Device transports only queue tensor hand-overs; their stages wait in recv_ids.)
  double waited = 0;
  auto timed = [&waited](auto&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!awaiting[g].empty()) {
        std::vector<int32_t> ids;
        timed([&] { ids = transport.recv_ids(last, static_cast<int>(awaiting[g].size())); });
        state.accept(awaiting[g], ids, nullptr);
        awaiting[g].clear();
      }
      const ForwardBatch batch = state.next_batch(groups[g], &members);
      if (members.empty()) continue;
      progressed = true;
      if (!stage.is_first) {
        const TensorRef input = runner.stage_input(batch.num_tokens());
        timed([&] { transport.recv_tensor(rank - 1, input); });
      }
      ModelRunner::StageResult out = runner.forward_stage(batch, on_device);
      maybe_inject_fault(rank, runner);
      if (stage.is_last) {
        std::vector<int32_t> tokens;
        if (on_device) {
          tokens = std::move(out.sampled.ids);
          for (size_t b = 0; b < members.size(); ++b)
            if (!state.ready_to_sample(members[b])) tokens[b] = -1;  // still mid-prompt
        } else {
          tokens = state.sample(members, out.logits);
        }
        for (int peer = 0; peer < last; ++peer) transport.post_ids(peer, tokens);
        state.accept(members, tokens, on_device ? nullptr : &out.logits);
      } else {
        timed([&] { transport.send_tensor(rank + 1, runner.stage_output()); });
        awaiting[g] = members;
      }
    }
  }
  timed([&] { transport.flush(); });
  if (stats) {
    *stats = state.stats();
    stats->wait_s = waited;
  }
  return state.outputs();
}

}  // namespace strata
