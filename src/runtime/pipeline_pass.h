#pragma once
// One forward pass of a batch through every stage of a pipeline, with one micro-batch in
// flight: the serving scheduler's pass under `strata serve --pp-size N` (Scheduler::run_sampled).
// Every stage runs it with the same batch (each stage's scheduler built it against its own
// token memory): the first stage embeds, each stage before the last hands its hidden state to
// the next, and the last stage draws each request's token and posts the ids back to every
// other stage, so every scheduler accepts the same tokens.
#include "dist/transport.h"
#include "runtime/model_runner.h"

namespace strata {

// The draw on every stage: the ids, and the logprobs and raw logits rows the batch asks for
// (through host memory). Grammar masks are not carried (the scheduler refuses grammars under
// a pipeline).
ModelRunner::SampledTokens pipelined_pass(ModelRunner& runner, Transport& transport,
                                          const ForwardBatch& batch);

// Fault injection for the failure tests (tests/pp_test.cpp, tests/pp_cuda_test.cpp,
// tests/pp_serve_test.cpp): STRATA_PP_FAULT=KIND:K makes stage K fail right after its first
// forward pass: exit (the process dies), hang (it stops answering), and on a GPU oom (an
// allocation fails) or trap (a kernel faults). Call it after every pass; it acts once.
void maybe_inject_fault(int stage, ModelRunner& runner);

}  // namespace strata
