#include "dist/pipeline_job.h"

#include <cstdio>
#include <memory>

#include "core/error.h"
#include "core/log.h"
#include "dist/gpu_assignment.h"
#include "dist/mpi_transport.h"
#include "dist/partition.h"
#ifdef STRATA_WITH_CUDA
#include "dist/device_communicator.h"
#endif
#ifdef STRATA_WITH_NCCL
#include "dist/nccl_transport.h"
#endif

namespace strata {

void validate_pipeline_job(const ModelConfig& config, const RunnerOptions& options,
                           const PipelineSetup& setup,
                           const std::vector<GenerateRequest>& requests) {
  partition_layers(config.num_layers, setup.pp_size, setup.layers_per_stage);
  if (!(setup.timeout_s > 0))
    fail("--pp-timeout must be a positive number of seconds, got {}", setup.timeout_s);
  options.validate(config);
  if (options.device == "cuda") {
#ifndef STRATA_WITH_NCCL
    // Tensor-parallel ranks alone run without NCCL (through host memory); stages need it.
    if (setup.pp_size > 1)
      fail(
          "--device cuda with --pp-size {}: this build has no NCCL, which GPU stages hand their "
          "hidden states over with; rebuild with NCCL (NCCL_ROOT) or use --device cpu",
          setup.pp_size);
#endif
    // On this machine every process takes a GPU of its own, or (fewer GPUs) the ranks of a
    // stage share the stage's.
    const std::string problem = gpu_assignment_problem(
        options.gpu_id, setup.pp_size * options.tp_size, cuda_device_count(), options.tp_size);
    if (!problem.empty()) fail("{}", problem);
  }
  validate_requests(config, options.resolved_max_context_len(config), requests);
}

void run_stage_process(const ModelConfig& config, RunnerOptions options, const PipelineSetup& setup,
                       bool serialized, const StageBody& body) {
  MpiTransport control(setup.timeout_s, serialized, options.tp_size);
  const int rank = control.rank(), size = control.size();
  std::string where = fmt::format("pipeline stage {}/{}", rank, size);
  if (options.tp_size > 1)
    where += fmt::format(", tensor-parallel rank {}/{}", control.tp_rank(), options.tp_size);
  // CPU stages hand tensors over through MPI; GPU stages through NCCL, with MPI under it.
  std::unique_ptr<Transport> device_transport;
  Transport* transport = &control;
  // GPU ranks' collectives (dist/device_communicator.h); CPU ranks use the MPI group itself.
  std::unique_ptr<Communicator> device_group;
  // Outside the try: on failure the runner must still exist when abort() runs. Destroying it
  // first would free device memory, which waits for every queued transfer, and a transfer
  // from a hung stage never ends; abort() (ncclCommAbort, then MPI_Abort) comes first and
  // never returns.
  std::unique_ptr<ModelRunner> runner;
  try {
    if (size != setup.pp_size) {
      const int processes = setup.pp_size * options.tp_size;
      const std::string wanted = options.tp_size == 1
                                     ? fmt::format("--pp-size is {}", setup.pp_size)
                                     : fmt::format("--pp-size {} x --tp-size {} is {}",
                                                   setup.pp_size, options.tp_size, processes);
      fail("this MPI job has {} processes but {}; start it with mpirun -np {}",
           control.world_size(), wanted, processes);
    }
    options.tensor_parallel = &control.tensor_parallel_group();
    const StagePlan plan =
        partition_layers(config.num_layers, setup.pp_size, setup.layers_per_stage)[rank];
    where += fmt::format(" (layers [{}, {}))", plan.start_layer, plan.end_layer);
    options.stage = plan;
    // The stages on one machine share its cores, each on its own (kernels/cpu/threads.h).
    options.cpu_slot = control.local_rank();
    options.cpu_slots = control.local_size();
    if (options.device == "cuda") {
      // One process per GPU: this machine's processes take consecutive GPUs from
      // --base-gpu-id, or its stages do, shared by their tensor-parallel ranks.
      const GpuPlacement placement =
          gpu_placement(options.gpu_id, control.local_rank(), control.local_size(),
                        cuda_device_count(), options.tp_size);
      options.gpu_id = placement.gpu;
      options.processes_per_gpu = placement.processes_per_gpu;
      where += fmt::format(" on GPU {}", options.gpu_id);
      // Passes wait on transfers from other stages and ranks: bound every wait for the device.
      options.device_wait_timeout_s = setup.timeout_s;
#ifdef STRATA_WITH_CUDA
      if (options.tp_size > 1) {
        device_group = make_gpu_tensor_group(control, placement, setup.timeout_s);
        options.tensor_parallel = device_group.get();
      }
#endif
#ifdef STRATA_WITH_NCCL
      device_transport = std::make_unique<NcclTransport>(control, options.gpu_id, setup.timeout_s);
#else
      if (setup.pp_size > 1)
        fail("this build has no NCCL: GPU pipeline stages need it (rebuild with NCCL_ROOT)");
#endif
    }
    runner = std::make_unique<ModelRunner>(config, options);
    for (const std::string& line : runner->startup_report(setup.pp_size))
      log::info("stage {}: {}", rank, line);
#ifdef STRATA_WITH_NCCL
    if (device_transport) {
      static_cast<NcclTransport&>(*device_transport)
          .set_stream(static_cast<cudaStream_t>(runner->device().stream()));
      transport = device_transport.get();
    }
#endif
    transport->barrier();  // every stage built: from here on, waits are for real work
    StageContext context{*runner, *transport, control, plan, where};
    body(context);
    std::fflush(stdout);
    transport->flush();
    transport->barrier();  // nobody leaves while another stage may still need it
    runner.reset();        // before the transport that orders work on its stream
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "error: %s: out of memory; use a smaller model, batch or --max-total-tokens\n",
                 where.c_str());
    if (device_group) device_group->abort_collectives();
    (device_transport ? device_transport.get() : transport)->abort(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s: %s\n", where.c_str(), e.what());
    if (device_group) device_group->abort_collectives();
    (device_transport ? device_transport.get() : transport)->abort(1);
  }
}

void run_pipeline_stage(const ModelConfig& config, RunnerOptions options,
                        const PipelineSetup& setup, const std::vector<GenerateRequest>& requests,
                        const GenerateOptions& generate_options, const StageReport& report) {
  run_stage_process(config, std::move(options), setup, false, [&](StageContext& stage) {
    GenerateStats stats;
    // Tensor parallelism alone (one stage): every rank runs the one-process loop; its ranks
    // build the same batches and draw the same ids from the same gathered logits.
    const auto outputs = generate(stage.runner, requests, generate_options, &stats,
                                  setup.pp_size == 1 ? nullptr : &stage.transport);
    // The group the layers use: the MPI one on CPU, the GPU one on devices.
    const Communicator& group = *stage.runner.options().tensor_parallel;
    stats.tp_collective_s = group.seconds();
    stats.tp_collectives = group.calls();
    // The ranks of a stage know the same outputs: its tensor-parallel rank 0 reports them.
    if (stage.control.tp_rank() == 0)
      report(stage.transport.rank(), stage.plan.is_last, outputs, stats);
  });
}

}  // namespace strata
