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
#include <csignal>
#include <string>

namespace strata {

// True when this process is one rank of a job an MPI launcher started.
bool inside_mpi_job();

// Runs this process's own command line (/proc/self/cmdline) as `np` processes under mpirun on
// this machine, waits, and returns the exit status to use (non-zero when any process failed).
// $STRATA_MPIRUN overrides the mpirun executable; $STRATA_MPIRUN_ARGS adds arguments.
// A SIGTERM to this process goes to mpirun, and to the processes mpirun started on this machine,
// as `stop_signal`: SIGTERM makes mpirun end every
// process (SIGTERM, then SIGKILL after a few seconds) and exit non-zero; SIGUSR1 it hands to
// every process and lets the job end by itself (a server's process 0 then stops serving and
// tells the other stages: server/pipeline_relay.h), exiting with the job's status.
int relaunch_under_mpirun(int np, int stop_signal = SIGTERM);

}  // namespace strata
