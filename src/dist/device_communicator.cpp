#include "dist/device_communicator.h"

#include "core/log.h"
#include "dist/staged_communicator.h"
#ifdef STRATA_WITH_NCCL
#include "dist/nccl_communicator.h"
#endif

namespace strata {

namespace {

#ifdef STRATA_WITH_NCCL
constexpr bool kNcclBuilt = true;
#else
constexpr bool kNcclBuilt = false;
#endif

}  // namespace

std::unique_ptr<Communicator> make_gpu_tensor_group(MpiTransport& control,
                                                    const GpuPlacement& placement,
                                                    double timeout_seconds) {
  MpiCommunicator& host = control.tensor_parallel_group();
  const bool mine =
      tensor_group_kind(kNcclBuilt, placement.processes_per_gpu) == TensorGroupKind::Nccl;
  // Every rank must take the same kind: a collective of one kind never meets the other.
  const bool nccl = host.min_over_ranks(mine ? 1 : 0) == 1;
#ifdef STRATA_WITH_NCCL
  if (nccl) return std::make_unique<NcclCommunicator>(host, placement.gpu, timeout_seconds);
#endif
  (void)nccl;
  if (host.rank() == 0)
    log::warning(
        "tensor-parallel ranks {}: collectives go through host memory over MPI (slower than "
        "NCCL, and decode steps run without CUDA graphs)",
        !kNcclBuilt ? std::string("run a build without NCCL")
        : placement.processes_per_gpu > 1
            ? fmt::format("share GPU {} ({} per GPU), which NCCL refuses", placement.gpu,
                          placement.processes_per_gpu)
            : std::string("include one that shares its GPU, which NCCL refuses"));
  return std::make_unique<HostStagedCommunicator>(host, placement.gpu, timeout_seconds);
}

}  // namespace strata
