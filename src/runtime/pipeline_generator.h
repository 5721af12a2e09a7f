#pragma once
// Pipelined generation: the generate loop as one pipeline stage runs it. Every stage runs
// this with the same requests and keeps the same GenerationState, so each builds the same
// batches against its own token memory; the first stage embeds, hidden states travel forward
// through the transport, the last stage samples and posts the chosen ids back to every other
// stage. The requests are split into micro-batches (one per stage by default) that follow each
// other through the stages, so that while the last stage works on micro-batch 0 the first
// already works on the next one (SGLang's pipeline loop does the same).
#include <vector>

#include "dist/transport.h"
#include "runtime/generator.h"

namespace strata {

// Runs on every stage process; the transport's rank is the stage index. Returns the outputs:
// complete on the last stage (logits included when asked); other stages know the ids but not
// the logits. options.micro_batches 0 means one per stage.
std::vector<GenerateOutput> generate_pipelined(ModelRunner& runner, Transport& transport,
                                               const std::vector<GenerateRequest>& requests,
                                               const GenerateOptions& options,
                                               GenerateStats* stats = nullptr);

}  // namespace strata
