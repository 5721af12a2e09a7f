#pragma once
// Where the CPU kernels' threads run. Decode streams every weight once per step through the
// caches of the cores that read it: a thread the kernel moves to another core mid-step leaves
// its prefetched lines behind and can land on a core that a sibling thread already occupies.
// So a pass pins the OpenMP team to one CPU per thread, as llama.cpp's --cpu-strict and vLLM's
// CPU backend can: always with --cpu-bind cores; with auto (the default) when the threads fill
// the process's share of the CPUs, which the default --threads does. A process that asks for
// fewer leaves the rest to other processes, which it cannot see, so auto leaves it unpinned.
//
// The pass's own thread (the team's master) is pinned for the pass only and gets its
// affinity back afterwards: threads it starts later (a server's, the grammar-mask worker)
// inherit its affinity, and must not all land on the master's one CPU. The team's other
// threads belong to OpenMP's pool, one pool per master thread, and stay pinned.
#include <string>
#include <vector>

namespace strata::cpu {

enum class ThreadBinding { Auto, Cores, None };

// "auto" | "cores" | "none"; anything else throws an Error naming --cpu-bind.
ThreadBinding parse_thread_binding(const std::string& name);

// The CPUs this process may run on (its affinity mask), ordered one per physical core first
// (a core's second hyperthread after every core's first), so that N threads take N cores.
std::vector<int> usable_cpus();

// The CPU of each of `threads` threads, or empty when they stay unpinned. The process is number
// `slot` of `slots` processes of one job sharing `usable` (mpirun starting several stages or
// ranks on one machine, each unbound) and takes `threads` CPUs from slot x threads; its share
// is usable / slots. When the job's threads do not fit `usable` side by side, the threads stay
// unpinned (pinning some processes would stack the others on their CPUs), unless the mask is
// narrower than the machine (`machine_cpus`) and the threads fill it: a launcher bound this
// process to CPUs of its own. With Auto, threads fewer than the share stay unpinned too.
std::vector<int> plan_thread_cpus(const std::vector<int>& usable, int machine_cpus, int threads,
                                  int slot, int slots, ThreadBinding binding);

// Sizes the OpenMP team (threads, 0: the usable CPUs shared among `slots` processes) and
// records the plan every later ScopedComputeThread applies. Returns the thread count.
int configure_threads(int threads, ThreadBinding binding, int slot = 0, int slots = 1);

// The plan configure_threads made (empty: unpinned).
std::vector<int> thread_cpus();

// Pins the calling thread to the plan's first CPU for its lifetime, and the OpenMP pool this
// thread masters to the rest (once per master thread and plan); restores the calling thread's
// affinity on destruction. Does nothing without a plan.
class ScopedComputeThread {
 public:
  ScopedComputeThread();
  ~ScopedComputeThread();
  ScopedComputeThread(const ScopedComputeThread&) = delete;
  ScopedComputeThread& operator=(const ScopedComputeThread&) = delete;

 private:
  bool pinned_ = false;
  std::vector<unsigned char> saved_;  // the calling thread's cpu_set_t before the pass
};

}  // namespace strata::cpu
