#pragma once
// One process's part of a pipeline- and/or tensor-parallel generate job (a grid of --pp-size
// stages x --tp-size ranks, docs/tensor_parallel.md): join the MPI job, build the stage
// this process's rank owns (its tensor-parallel shard of it) (its layers, its pools: nothing of
// other stages), run the pipelined generate loop, and turn any failure into a job-wide end: the
// failing stage prints "error: pipeline stage k/N ...: <why>" and calls MPI_Abort, and mpirun ends
// every process with a non-zero status. With --device cuda each stage drives one GPU (--base-gpu-id
// plus its rank on this machine) and hands tensors over through NCCL (dist/nccl_transport.h).
#include <functional>
#include <vector>

#include "dist/transport.h"
#include "runtime/generator.h"

namespace strata {
class MpiTransport;
}

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

// What a stage process does once its runner is built and every stage reached the start
// barrier: `transport` hands tensors and ids over (MPI, or NCCL on GPUs), `control` is the
// MPI job itself (control messages), `where` names the stage for error lines.
struct StageContext {
  ModelRunner& runner;
  Transport& transport;
  MpiTransport& control;
  const StagePlan& plan;
  const std::string& where;
};
using StageBody = std::function<void(StageContext&)>;

// Joins the MPI job as the stage its rank names (checking the job's size against --pp-size),
// builds that stage's runner (its layers only; threads: this machine's cores shared by its
// stages; on a GPU, its own GPU), runs `body`, and turns any failure into a job-wide end: the
// error line names the stage, then MPI_Abort. `serialized`: a thread other than this one
// calls MPI (MpiTransport). Shared by generate's stages and serve's. Returns only on success.
void run_stage_process(const ModelConfig& config, RunnerOptions options, const PipelineSetup& setup,
                       bool serialized, const StageBody& body);

// Runs this process's stage of a generate job and calls `report` on it.
// Returns only on success.
void run_pipeline_stage(const ModelConfig& config, RunnerOptions options,
                        const PipelineSetup& setup, const std::vector<GenerateRequest>& requests,
                        const GenerateOptions& generate_options, const StageReport& report);

}  // namespace strata
