#include "runtime/pipeline_pass.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"

namespace strata {

void maybe_inject_fault(int stage, ModelRunner& runner) {
  static bool checked = false;  // after the first pass only
  if (checked) return;
  checked = true;
  const char* spec = std::getenv("STRATA_PP_FAULT");
  if (!spec) return;
  const std::string s = spec;
  const auto colon = s.find(':');
  if (colon == std::string::npos || std::stoi(s.substr(colon + 1)) != stage) return;
  const std::string kind = s.substr(0, colon);
  if (kind == "exit") std::_Exit(3);
  if (kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
  if (runner.memory_kind() == Memory::Device) runner.device().inject_fault(kind);
}

ModelRunner::SampledTokens pipelined_pass(ModelRunner& runner, Transport& transport,
                                          const ForwardBatch& batch) {
  const StagePlan& stage = runner.stage();
  const int rank = transport.rank(), last = transport.size() - 1;
  STRATA_CHECK(batch.top_logprobs < 0 && batch.raw_logit_rows.empty() && batch.mask_rows.empty(),
               "a pipelined pass carries only the drawn ids");
  if (!stage.is_first) transport.recv_tensor(rank - 1, runner.stage_input(batch.num_tokens()));
  ModelRunner::StageResult out = runner.forward_stage(batch, true);
  maybe_inject_fault(rank, runner);
  ModelRunner::SampledTokens drawn;
  if (stage.is_last) {
    drawn = std::move(out.sampled);
    for (int peer = 0; peer < last; ++peer) transport.post_ids(peer, drawn.ids);
  } else {
    transport.send_tensor(rank + 1, runner.stage_output());
    drawn.ids = transport.recv_ids(last, batch.batch_size());
  }
  return drawn;
}

}  // namespace strata
