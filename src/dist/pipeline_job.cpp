#include "dist/pipeline_job.h"

#include <cstdio>
#include <memory>
#include <thread>

#include "core/error.h"
#include "dist/mpi_transport.h"
#include "dist/partition.h"
#include "runtime/pipeline_generator.h"

namespace strata {

void validate_pipeline_job(const ModelConfig& config, const RunnerOptions& options,
                           const PipelineSetup& setup,
                           const std::vector<GenerateRequest>& requests) {
  partition_layers(config.num_layers, setup.pp_size, setup.layers_per_stage);
  if (!(setup.timeout_s > 0))
    fail("--pp-timeout must be a positive number of seconds, got {}", setup.timeout_s);
  options.validate(config);
  validate_requests(config, options.resolved_max_context_len(config), requests);
}

void run_pipeline_stage(const ModelConfig& config, RunnerOptions options,
                        const PipelineSetup& setup, const std::vector<GenerateRequest>& requests,
                        const GenerateOptions& generate_options, const StageReport& report) {
  MpiTransport transport(setup.timeout_s);
  const int rank = transport.rank(), size = transport.size();
  std::string where = fmt::format("pipeline stage {}/{}", rank, size);
  try {
    if (size != setup.pp_size)
      fail("this MPI job has {} processes but --pp-size is {}; start it with mpirun -np {}", size,
           setup.pp_size, setup.pp_size);
    const StagePlan plan =
        partition_layers(config.num_layers, setup.pp_size, setup.layers_per_stage)[rank];
    where += fmt::format(" (layers [{}, {}))", plan.start_layer, plan.end_layer);
    options.stage = plan;
    // The stages on one machine share its cores.
    if (options.threads == 0)
      options.threads = std::max(
          1, static_cast<int>(std::thread::hardware_concurrency()) / transport.local_size());
    ModelRunner runner(config, options);
    transport.barrier();  // every stage built: from here on, waits are for real work
    GenerateStats stats;
    const auto outputs = generate_pipelined(runner, transport, requests, generate_options, &stats);
    report(rank, plan.is_last, outputs, stats);
    std::fflush(stdout);
    transport.flush();
    transport.barrier();  // nobody leaves while another stage may still need it
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "error: %s: out of memory; use a smaller model, batch or --max-total-tokens\n",
                 where.c_str());
    transport.abort(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s: %s\n", where.c_str(), e.what());
    transport.abort(1);
  }
}

}  // namespace strata
