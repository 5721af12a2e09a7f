#include "dist/launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

// Set by a SIGTERM to the launcher; the wait for mpirun below hands it on (a handler may not
// scan /proc).
volatile std::sig_atomic_t g_stop_requested = 0;
extern "C" void note_sigterm(int) {
  g_stop_requested = 1;
}

// The processes whose parent is `parent` (/proc/PID/stat's fourth field).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) children.push_back(std::stoi(name));
  }
  return children;
}

// The stop goes to mpirun and, besides, straight to the processes it started on this machine:
// mpirun is meant to hand SIGUSR1 on to them, and on one machine (the H200 host, 2026-12-04) it
// caught the signal and handed nothing on, so the server never heard of its stop. A process that
// gets the signal twice stops once; the followers ignore it (process 0 tells them).
void forward_stop(pid_t mpirun, int stop_signal) {
  kill(mpirun, stop_signal);
  for (pid_t child : children_of(mpirun)) kill(child, stop_signal);
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
  g_stop_requested = 0;
  struct sigaction note {};
  note.sa_handler = note_sigterm;
  sigemptyset(&note.sa_mask);
  struct sigaction previous_term {};
  sigaction(SIGTERM, &note, &previous_term);
  signal(SIGINT, SIG_IGN);
  // Polled (a tenth of a second): a SIGTERM landing between a check of the flag and a blocking
  // wait would otherwise wait unseen until the job ended by itself.
  int status = 0;
  bool forwarded = false;
  for (;;) {
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) fail("waiting for mpirun failed: {}", std::strerror(errno));
    if (g_stop_requested && !forwarded) {
      forward_stop(child, stop_signal);
      forwarded = true;
    }
    usleep(100 * 1000);
  }
  signal(SIGINT, SIG_DFL);
  sigaction(SIGTERM, &previous_term, nullptr);
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
