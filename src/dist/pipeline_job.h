#pragma once
// One process's part of a pipeline-parallel generate job: join the MPI job, build the stage
// this process's rank owns (its layers, its pools: nothing of other stages), run the pipelined
// generate loop, and turn any failure into a job-wide end: the failing stage prints
// "error: pipeline stage k/N ...: <why>" and calls MPI_Abort, and mpirun ends every process
// with a non-zero status. With --device cuda each stage drives one GPU (--base-gpu-id plus
// its rank on this machine) and hands tensors over through NCCL (dist/nccl_transport.h).
#include <functional>
#include <vector>

#include "runtime/generator.h"

namespace strata {

struct PipelineSetup {
  int pp_size = 1;
  std::vector<int> layers_per_stage;  // empty: the even split (dist/partition.h)
  double timeout_s = 600;             // longest wait for another stage, model loading included
};

// Everything that can be checked before any process starts (the partition, the requests),
// so that a launcher reports bad input once instead of once per stage.
void validate_pipeline_job(const ModelConfig& config, const RunnerOptions& options,
                           const PipelineSetup& setup,
                           const std::vector<GenerateRequest>& requests);

// Called on every stage when it is done: `stage` k of the pipeline, its outputs (complete, with
// logits, only on the last stage) and its timing.
using StageReport = std::function<void(int stage, bool is_last, const std::vector<GenerateOutput>&,
                                       const GenerateStats&)>;

// Runs this process's stage and calls `report` on it.
// Returns only on success.
void run_pipeline_stage(const ModelConfig& config, RunnerOptions options,
                        const PipelineSetup& setup, const std::vector<GenerateRequest>& requests,
                        const GenerateOptions& generate_options, const StageReport& report);

}  // namespace strata
