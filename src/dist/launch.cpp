#include "dist/launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace strata {

namespace {

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : raw) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (args.empty()) fail("cannot read this process's command line from /proc/self/cmdline");
  return args;
}

// mpirun and the signal a SIGTERM is handed on as, for the handler below.
volatile pid_t g_mpirun = -1;
volatile int g_stop_signal = SIGTERM;
extern "C" void forward_sigterm(int) {
  if (g_mpirun > 0) kill(g_mpirun, g_stop_signal);
}

std::string own_executable() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) fail("cannot find this executable through /proc/self/exe");
  return std::string(path.data(), n);
}

}  // namespace

bool inside_mpi_job() {
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMIx and PMI launchers (srun, MPICH's
  // hydra) set PMIX_RANK / PMI_RANK.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

int relaunch_under_mpirun(int np, int stop_signal) {
  const char* mpirun_env = std::getenv("STRATA_MPIRUN");
  const std::string mpirun = mpirun_env && *mpirun_env ? mpirun_env : "mpirun";
  std::vector<std::string> args = {mpirun, "-np", std::to_string(np),
                                   // More stages than cores is allowed (they share them), and
                                   // processes are not pinned: each stage sizes its own threads.
                                   "--oversubscribe", "--bind-to", "none",
                                   // One machine: shared memory and loopback only.
                                   "--mca", "btl", "self,vader"};
  if (geteuid() == 0) args.insert(args.begin() + 3, {"--allow-run-as-root"});
  if (const char* extra = std::getenv("STRATA_MPIRUN_ARGS")) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) args.push_back(w);
  }
  const auto self = own_command_line();
  args.push_back(own_executable());
  args.insert(args.end(), self.begin() + 1, self.end());
  // Containers often forbid cross-process memory access (CMA); plain copies through shared
  // memory work everywhere. The user's own setting wins.
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);

  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) fail("cannot start mpirun: fork failed: {}", std::strerror(errno));
  if (child == 0) {
    // If this launcher dies, mpirun (and through it every stage) goes too.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr,
                 "error: cannot run '%s' (%s); --pp-size > 1 needs OpenMPI: install openmpi-bin, "
                 "or point STRATA_MPIRUN at mpirun\n",
                 mpirun.c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  // Ctrl-C reaches mpirun too (same process group); wait for it to end the stages. SIGTERM
  // goes to this process alone: it is handed on as `stop_signal`, and this one waits, so that
  // the exit status is mpirun's.
  g_mpirun = child;
  g_stop_signal = stop_signal;
  struct sigaction forward {};
  forward.sa_handler = forward_sigterm;
  sigemptyset(&forward.sa_mask);
  struct sigaction previous_term {};
  sigaction(SIGTERM, &forward, &previous_term);
  signal(SIGINT, SIG_IGN);
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) fail("waiting for mpirun failed: {}", std::strerror(errno));
  signal(SIGINT, SIG_DFL);
  sigaction(SIGTERM, &previous_term, nullptr);
  g_mpirun = -1;
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code != 0 && code != 127)
      std::fprintf(
          stderr,
          "error: the %d processes of the job (pipeline stages x tensor-parallel ranks) did not "
          "all finish (mpirun exit status %d); the messages above name the failing one\n",
          np, code);
    return code;
  }
  const int sig = WTERMSIG(status);
  std::fprintf(stderr,
               "error: mpirun was killed by signal %d (%s); the job's processes ended with it\n",
               sig, strsignal(sig));
  return 128 + sig;
}

}  // namespace strata
