#include "runtime/pipeline_pass.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "ops/logprobs.h"

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
  STRATA_CHECK(batch.mask_rows.empty(), "grammar masks in a pipelined pass");
  if (!stage.is_first) transport.recv_tensor(rank - 1, runner.stage_input(batch.num_tokens()));
  ModelRunner::StageResult out = runner.forward_stage(batch, true);
  maybe_inject_fault(rank, runner);
  // Besides the ids, the logprobs rows, raw logits rows and prompt-logit rows the batch asks
  // for go back from the last stage to every stage: process 0 answers with them, and every
  // stage's scheduler records the same draws. One host tensor: logprobs [B x width], then the
  // raw rows, then the prompt rows.
  const int rows = batch.batch_size(), vocab = runner.config().vocab_size;
  const int64_t logprob_floats =
      batch.top_logprobs >= 0 ? int64_t{rows} * logprob_row_width(batch.top_logprobs) : 0;
  const int64_t row_count =
      static_cast<int64_t>(batch.raw_logit_rows.size() + batch.logits_rows.size());
  const int64_t extra_floats = logprob_floats + row_count * vocab;
  if (extra_floats > 0 && transport.memory() != Memory::Host)
    fail("logprobs and raw logits travel between pipeline stages only through host memory");
  ModelRunner::SampledTokens drawn;
  if (stage.is_last) {
    drawn = std::move(out.sampled);
    for (int peer = 0; peer < last; ++peer) transport.post_ids(peer, drawn.ids);
    if (extra_floats == 0) return drawn;
    STRATA_CHECK(static_cast<int64_t>(drawn.logprobs.size()) == logprob_floats,
                 "{} logprob floats, expected {}", drawn.logprobs.size(), logprob_floats);
    std::vector<float> extras = drawn.logprobs;
    for (const auto* rows_of : {&drawn.raw_logits, &drawn.token_logits})
      for (const auto& row : *rows_of) {
        STRATA_CHECK(static_cast<int>(row.size()) == vocab, "a logits row of {} for vocab {}",
                     row.size(), vocab);
        extras.insert(extras.end(), row.begin(), row.end());
      }
    STRATA_CHECK(static_cast<int64_t>(extras.size()) == extra_floats,
                 "{} floats of logprobs and logits rows, expected {}", extras.size(), extra_floats);
    for (int peer = 0; peer < last; ++peer)
      transport.send_tensor(peer, TensorRef{extras.data(), {extra_floats}, Memory::Host});
    return drawn;
  }
  transport.send_tensor(rank + 1, runner.stage_output());
  drawn.ids = transport.recv_ids(last, rows);
  if (extra_floats == 0) return drawn;
  std::vector<float> extras(static_cast<size_t>(extra_floats));
  transport.recv_tensor(last, TensorRef{extras.data(), {extra_floats}, Memory::Host});
  drawn.logprobs.assign(extras.begin(), extras.begin() + logprob_floats);
  auto row = extras.begin() + logprob_floats;
  for (size_t r = 0; r < batch.raw_logit_rows.size(); ++r, row += vocab)
    drawn.raw_logits.emplace_back(row, row + vocab);
  for (size_t r = 0; r < batch.logits_rows.size(); ++r, row += vocab)
    drawn.token_logits.emplace_back(row, row + vocab);
  return drawn;
}

}  // namespace strata
