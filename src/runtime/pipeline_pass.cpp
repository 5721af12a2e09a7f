#include "runtime/pipeline_pass.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
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
  // K is this process's place in the job: stage * tp_size + tensor-parallel rank.
  const Communicator* tp = runner.options().tensor_parallel;
  const int process = tp ? stage * tp->size() + tp->rank() : stage;
  if (colon == std::string::npos || std::stoi(s.substr(colon + 1)) != process) return;
  const std::string kind = s.substr(0, colon);
  if (kind == "exit") std::_Exit(3);
  if (kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
  if (runner.memory_kind() == Memory::Device) runner.device().inject_fault(kind);
}

namespace {

// Seconds `call` took.
template <typename Call>
double timed(Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t logprob_floats(const ForwardBatch& batch) {
  return batch.top_logprobs >= 0
             ? int64_t{batch.batch_size()} * logprob_row_width(batch.top_logprobs)
             : 0;
}

// The floats that follow the ids to the answering stage: logprobs [B x width], then the raw
// logits rows, then the prompt logits rows.
int64_t extra_floats(const ModelRunner& runner, const ForwardBatch& batch) {
  const auto rows = static_cast<int64_t>(batch.raw_logit_rows.size() + batch.logits_rows.size());
  return logprob_floats(batch) + rows * runner.config().vocab_size;
}

}  // namespace

bool launch_pipelined_pass(ModelRunner& runner, Transport& transport, const ForwardBatch& batch,
                           int answer_rank, ModelRunner::SampledTokens* drawn, double* wait_s) {
  const StagePlan& stage = runner.stage();
  const int rank = transport.rank(), last = transport.size() - 1;
  STRATA_CHECK(batch.mask_rows.empty(), "grammar masks in a pipelined pass");
  if (!stage.is_first) {
    const TensorRef input = runner.stage_input(batch.num_tokens());
    *wait_s += timed([&] { transport.recv_tensor(rank - 1, input); });
  }
  ModelRunner::StageResult out = runner.forward_stage(batch, true);
  maybe_inject_fault(rank, runner);
  if (!stage.is_last) {
    *wait_s += timed([&] { transport.send_tensor(rank + 1, runner.stage_output()); });
    return false;
  }
  *drawn = std::move(out.sampled);
  const int64_t extras = extra_floats(runner, batch);
  for (int peer = 0; peer < last; ++peer) {
    if (peer != answer_rank || extras == 0) {
      transport.post_ids(peer, drawn->ids);
      continue;
    }
    // The answering stage's rows follow its ids in the same posted message (float bits in
    // int32 words): a synchronous send here would wait for a stage that may itself be waiting
    // to hand its next micro-batch forward to this one.
    if (transport.memory() != Memory::Host)
      fail("logprobs and raw logits travel between pipeline stages only through host memory");
    STRATA_CHECK(static_cast<int64_t>(drawn->logprobs.size()) == logprob_floats(batch),
                 "{} logprob floats, expected {}", drawn->logprobs.size(), logprob_floats(batch));
    std::vector<float> floats = drawn->logprobs;
    for (const auto* rows_of : {&drawn->raw_logits, &drawn->token_logits})
      for (const auto& row : *rows_of) {
        STRATA_CHECK(static_cast<int>(row.size()) == runner.config().vocab_size,
                     "a logits row of {} for vocab {}", row.size(), runner.config().vocab_size);
        floats.insert(floats.end(), row.begin(), row.end());
      }
    STRATA_CHECK(static_cast<int64_t>(floats.size()) == extras,
                 "{} floats of logprobs and logits rows, expected {}", floats.size(), extras);
    std::vector<int32_t> message = drawn->ids;
    message.resize(drawn->ids.size() + floats.size());
    std::memcpy(message.data() + drawn->ids.size(), floats.data(), floats.size() * sizeof(float));
    transport.post_ids(peer, std::move(message));
  }
  return true;
}

ModelRunner::SampledTokens collect_pipelined_draws(ModelRunner& runner, Transport& transport,
                                                   const ForwardBatch& batch, int answer_rank) {
  const int last = transport.size() - 1, rows = batch.batch_size(),
            vocab = runner.config().vocab_size;
  const int64_t extras = transport.rank() == answer_rank ? extra_floats(runner, batch) : 0;
  ModelRunner::SampledTokens drawn;
  drawn.ids = transport.recv_ids(last, static_cast<int>(rows + extras));
  if (extras == 0) return drawn;
  std::vector<float> floats(static_cast<size_t>(extras));
  std::memcpy(floats.data(), drawn.ids.data() + rows, floats.size() * sizeof(float));
  drawn.ids.resize(static_cast<size_t>(rows));
  const int64_t logprobs = logprob_floats(batch);
  drawn.logprobs.assign(floats.begin(), floats.begin() + logprobs);
  auto row = floats.begin() + logprobs;
  for (size_t r = 0; r < batch.raw_logit_rows.size(); ++r, row += vocab)
    drawn.raw_logits.emplace_back(row, row + vocab);
  for (size_t r = 0; r < batch.logits_rows.size(); ++r, row += vocab)
    drawn.token_logits.emplace_back(row, row + vocab);
  return drawn;
}

}  // namespace strata
