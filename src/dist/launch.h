#pragma once
// Starting a multi-process job. `strata generate --pp-size N` on one machine re-runs its own
// command line under `mpirun -np N` (every process then finds itself inside the MPI job and
// becomes one stage). Across machines the user runs mpirun with a host file instead, and
// strata only joins the job it finds itself in (docs/pipeline_parallel.md).
//
// Why re-exec under mpirun rather than MPI_Comm_spawn: spawning needs a singleton MPI init
// that starts its own runtime daemon, which is fragile inside containers and behaves
// differently per MPI build; mpirun is the launcher every MPI installation tests, it ends
// every process when one fails or calls MPI_Abort, and the same command works across hosts.
#include <string>

namespace strata {

// True when this process is one rank of a job an MPI launcher started.
bool inside_mpi_job();

// Runs this process's own command line (/proc/self/cmdline) as `np` processes under mpirun on
// this machine, waits, and returns the exit status to use (non-zero when any process failed).
// $STRATA_MPIRUN overrides the mpirun executable; $STRATA_MPIRUN_ARGS adds arguments.
int relaunch_under_mpirun(int np);

}  // namespace strata
