#include "runtime/pipeline_generator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "runtime/generation_state.h"

namespace strata {

namespace {

// Fault injection for the failure tests (tests/pp_test.cpp): STRATA_PP_FAULT=hang:K or exit:K
// makes stage K hang, or die, right after its first forward pass.
void maybe_inject_fault(int stage) {
  const char* spec = std::getenv("STRATA_PP_FAULT");
  if (!spec) return;
  const std::string s = spec;
  const auto colon = s.find(':');
  if (colon == std::string::npos || std::stoi(s.substr(colon + 1)) != stage) return;
  if (s.substr(0, colon) == "exit") std::_Exit(3);
  if (s.substr(0, colon) == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
}

}  // namespace

std::vector<GenerateOutput> generate_pipelined(ModelRunner& runner, Transport& transport,
                                               const std::vector<GenerateRequest>& requests,
                                               const GenerateOptions& options,
                                               GenerateStats* stats) {
  validate_requests(runner, requests);
  const StagePlan& stage = runner.model().stage();
  const int rank = transport.rank(), last = transport.size() - 1;
  STRATA_CHECK(stage.is_first == (rank == 0) && stage.is_last == (rank == last),
               "stage [{}, {}) runs as process {} of {}", stage.start_layer, stage.end_layer, rank,
               last + 1);
  GenerationState state(runner.config(), runner.memory(), runner.state_pool(), requests, options);
  const auto groups = split_into_micro_batches(
      static_cast<int>(requests.size()),
      options.micro_batches > 0 ? options.micro_batches : transport.size());
  // A micro-batch whose ids this stage still has to receive from the last stage.
  std::vector<std::vector<int>> awaiting(groups.size());
  std::vector<int> members;
  bool first_pass = true;
  // Time spent in the transport: waiting for the neighbours, i.e. the pipeline's bubbles.
  double waited = 0;
  auto timed = [&waited](auto&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    auto result = call();
    waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!awaiting[g].empty()) {
        state.accept(awaiting[g], timed([&] { return transport.recv_ids(last); }), nullptr);
        awaiting[g].clear();
      }
      const ForwardBatch batch = state.next_batch(groups[g], &members);
      if (members.empty()) continue;
      progressed = true;
      Tensor hidden_in;
      if (!stage.is_first) {
        hidden_in = timed([&] { return transport.recv_tensor(rank - 1); });
        if (hidden_in.ndim() != 2 || hidden_in.dim(0) != batch.num_tokens() ||
            hidden_in.dim(1) != runner.config().hidden_size)
          fail(
              "pipeline stages disagree: stage {} built a batch of {} tokens but stage {} sent "
              "a hidden state of shape {}; every stage must run the same build with the same "
              "flags and prompts",
              rank, batch.num_tokens(), rank - 1, hidden_in.shape_str());
      }
      const Tensor out = runner.forward(batch, hidden_in);
      if (first_pass) maybe_inject_fault(rank);
      first_pass = false;
      if (stage.is_last) {
        const std::vector<int32_t> tokens = state.sample(members, out);
        for (int peer = 0; peer < last; ++peer) transport.post_ids(peer, tokens);
        state.accept(members, tokens, &out);
      } else {
        timed([&] {
          transport.send_tensor(rank + 1, out);
          return 0;
        });
        awaiting[g] = members;
      }
    }
  }
  timed([&] {
    transport.flush();
    return 0;
  });
  if (stats) {
    *stats = state.stats();
    stats->wait_s = waited;
  }
  return state.outputs();
}

}  // namespace strata
