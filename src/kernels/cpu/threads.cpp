#include "kernels/cpu/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "kernels/cpu/gemm.h"

namespace strata::cpu {

namespace {

// Room for every CPU Linux numbers (CONFIG_NR_CPUS is at most 8192).
constexpr int kMaxCpus = 8192;

struct CpuSet {
  CpuSet() : set(CPU_ALLOC(kMaxCpus)), size(CPU_ALLOC_SIZE(kMaxCpus)) { CPU_ZERO_S(size, set); }
  ~CpuSet() { CPU_FREE(set); }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;
  cpu_set_t* set;
  size_t size;
};

bool pin_this_thread(int cpu) {
  CpuSet one;
  CPU_SET_S(cpu, one.size, one.set);
  return pthread_setaffinity_np(pthread_self(), one.size, one.set) == 0;
}

// The plan every compute thread applies, and a generation that changes with it.
struct Plan {
  std::mutex mutex;
  int threads = 0;  // 0: not configured (OpenMP's own default)
  std::vector<int> cpus;
  int generation = 0;
};
Plan& plan() {
  static Plan p;
  return p;
}

// The generation this thread last applied (its OpenMP thread count and its pool's pins).
thread_local int applied_generation = 0;

}  // namespace

ThreadBinding parse_thread_binding(const std::string& name) {
  if (name == "auto") return ThreadBinding::Auto;
  if (name == "cores") return ThreadBinding::Cores;
  if (name == "none") return ThreadBinding::None;
  fail(
      "--cpu-bind must be auto (pin when the threads fill this process's CPUs), cores (always "
      "pin, one CPU per thread) or none (threads left to the kernel's scheduler), got '{}'",
      name);
}

std::vector<int> usable_cpus() {
  CpuSet mask;
  std::vector<int> cpus;
  if (sched_getaffinity(0, mask.size, mask.set) != 0) return cpus;
  for (int c = 0; c < kMaxCpus; ++c)
    if (CPU_ISSET_S(c, mask.size, mask.set)) cpus.push_back(c);
  // A core's hyperthreads list the same siblings; the n-th of them sorts after every core's
  // (n-1)-th. Where sysfs says nothing (some containers) every CPU is its own core.
  std::map<std::string, int> seen;  // siblings list -> CPUs of that core met so far
  std::vector<std::tuple<int, int>> order;
  for (int c : cpus) {
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) +
                    "/topology/thread_siblings_list");
    std::string siblings;
    if (!(f >> siblings)) siblings = std::to_string(c);
    order.emplace_back(seen[siblings]++, c);
  }
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i) cpus[i] = std::get<1>(order[i]);
  return cpus;
}

std::vector<int> plan_thread_cpus(const std::vector<int>& usable, int machine_cpus, int threads,
                                  int slot, int slots, ThreadBinding binding) {
  if (binding == ThreadBinding::None || threads < 1 || slot < 0 || slot >= slots) return {};
  const auto n = static_cast<int64_t>(usable.size());
  if (int64_t{slots} * threads > n) {
    // The job's processes do not fit these CPUs side by side. Where the mask is narrower than
    // the machine and the threads fill it exactly, a launcher bound this process to a mask of
    // its own (mpirun --bind-to core): pinning within it stacks nobody. Otherwise the processes
    // share the CPUs, and pinning some would stack the others on theirs.
    if (n < machine_cpus && threads == n) return usable;
    return {};
  }
  // Fewer threads than the process's share leave CPUs to other processes, which pinning
  // would not see: auto leaves them to the scheduler.
  if (binding == ThreadBinding::Auto && threads < n / slots) return {};
  const int64_t first = int64_t{slot} * threads;
  return {usable.begin() + first, usable.begin() + first + threads};
}

int configure_threads(int threads, ThreadBinding binding, int slot, int slots) {
  const std::vector<int> usable = usable_cpus();
  const int count = std::max<int>(1, static_cast<int>(usable.size()));
  if (threads <= 0) threads = std::max(1, count / std::max(1, slots));
  const int machine = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<int> cpus = plan_thread_cpus(usable, machine, threads, slot, slots, binding);
  Plan& p = plan();
  {
    std::lock_guard lock(p.mutex);
    p.threads = threads;
    p.cpus = std::move(cpus);
    ++p.generation;
  }
  set_num_threads(threads);  // this thread's team; other threads apply it in their first pass
  return threads;
}

std::vector<int> thread_cpus() {
  Plan& p = plan();
  std::lock_guard lock(p.mutex);
  return p.cpus;
}

ScopedComputeThread::ScopedComputeThread() {
  if (omp_in_parallel()) return;
  Plan& p = plan();
  int threads, generation;
  std::vector<int> cpus;
  {
    std::lock_guard lock(p.mutex);
    threads = p.threads, generation = p.generation, cpus = p.cpus;
  }
  if (threads == 0 || (cpus.empty() && applied_generation == generation)) return;
  CpuSet saved;
  if (pthread_getaffinity_np(pthread_self(), saved.size, saved.set) != 0) return;
  if (!cpus.empty()) {
    saved_.assign(reinterpret_cast<unsigned char*>(saved.set),
                  reinterpret_cast<unsigned char*>(saved.set) + saved.size);
    pinned_ = pin_this_thread(cpus[0]);
  }
  if (applied_generation == generation) return;
  // OpenMP's thread count is a setting of the thread that sets it: a pass on another thread
  // (the server's engine thread) would otherwise run with OpenMP's default, every CPU.
  set_num_threads(threads);
  // The pool's threads take the plan's CPUs, or this thread's own mask when the plan pins
  // nothing (undoing an earlier plan's pins). libgomp hands team member t the same pool
  // thread in every region this thread masters.
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    if (t > 0) {
      if (cpus.empty())
        pthread_setaffinity_np(pthread_self(), saved.size, saved.set);
      else
        pin_this_thread(cpus[t]);
    }
  }
  applied_generation = generation;
}

ScopedComputeThread::~ScopedComputeThread() {
  if (!pinned_) return;
  pthread_setaffinity_np(pthread_self(), saved_.size(),
                         reinterpret_cast<const cpu_set_t*>(saved_.data()));
}

}  // namespace strata::cpu
