#pragma once
// One forward pass of a batch through every stage of a pipeline: the scheduler's pass under
// `--pp-size N` (Scheduler::run_sampled), serve's and generate's. Every stage runs it with the
// same batch (each stage's scheduler built it against its own token memory): the first stage
// embeds, each stage before the last hands its hidden state to the next, and the last stage
// draws each request's token and posts the ids back to every other stage, so every scheduler
// accepts the same tokens.
#include "dist/transport.h"
#include "runtime/model_runner.h"

namespace strata {

// One stage's part of a pass, in two halves so that a stage can launch its next micro-batch
// before the draws of this one are back (Scheduler::InFlight). launch: the stage receives
// its input (not on the first), runs its layers, and hands its hidden state to the next
// stage, or on the last stage draws every token and posts the ids to every other stage;
// returns true there, with `drawn` filled. collect (every stage but the last, later): the
// ids. The logprobs, raw logits and prompt logits rows the batch asks for travel only to
// `answer_rank`, the stage whose outputs are delivered, through host memory (grammar masks
// are not carried: the scheduler refuses grammars under a pipeline). `wait_s` adds the time
// spent blocked on the transport.
bool launch_pipelined_pass(ModelRunner& runner, Transport& transport, const ForwardBatch& batch,
                           int answer_rank, ModelRunner::SampledTokens* drawn, double* wait_s);
ModelRunner::SampledTokens collect_pipelined_draws(ModelRunner& runner, Transport& transport,
                                                   const ForwardBatch& batch, int answer_rank);

// Fault injection for the failure tests (tests/pp_test.cpp, tests/pp_cuda_test.cpp,
// tests/pp_serve_test.cpp, tests/tp_serve_test.cpp): STRATA_PP_FAULT=KIND:K makes process K
// of the job (stage * tp_size + tensor-parallel rank; the stage without tensor parallelism)
// fail right after its first forward pass: exit (the process dies), hang (it stops answering), and
// on a GPU oom (an allocation fails) or trap (a kernel faults). Call it after every pass; it acts
// once.
void maybe_inject_fault(int stage, ModelRunner& runner);

}  // namespace strata
