#include "kernels/cpu/threads.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include "core/error.h"

namespace strata::cpu {
namespace {

std::vector<int> range(int first, int count) {
  std::vector<int> v(count);
  for (int i = 0; i < count; ++i) v[i] = first + i;
  return v;
}

// The CPUs the calling thread may run on.
std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

TEST(CpuThreads, PlansGiveEachProcessOfAJobItsOwnCpus) {
  const auto all = range(0, 8);
  for (ThreadBinding bind : {ThreadBinding::Auto, ThreadBinding::Cores}) {
    EXPECT_EQ(plan_thread_cpus(all, 8, 8, 0, 1, bind), all);
    EXPECT_EQ(plan_thread_cpus(all, 8, 4, 1, 2, bind), range(4, 4));
    EXPECT_EQ(plan_thread_cpus(all, 8, 2, 2, 3, bind), range(4, 2));  // share 8 / 3 = 2
    // The order of `usable` (cores before their second hyperthreads) is kept.
    EXPECT_EQ(plan_thread_cpus({0, 2, 1, 3}, 4, 2, 1, 2, bind), (std::vector<int>{1, 3}));
  }
}

TEST(CpuThreads, AutoPinsOnlyThreadsThatFillTheProcessesShare) {
  const auto all = range(0, 8);
  EXPECT_TRUE(plan_thread_cpus(all, 8, 4, 0, 1, ThreadBinding::Auto).empty());
  EXPECT_TRUE(plan_thread_cpus(all, 8, 1, 1, 2, ThreadBinding::Auto).empty());
  EXPECT_EQ(plan_thread_cpus(all, 8, 4, 0, 1, ThreadBinding::Cores), range(0, 4));
  EXPECT_EQ(plan_thread_cpus(all, 8, 1, 1, 2, ThreadBinding::Cores), (std::vector<int>{1}));
  EXPECT_EQ(plan_thread_cpus(all, 8, 2, 1, 3, ThreadBinding::Cores), range(2, 2));
}

TEST(CpuThreads, PlansPinNothingWhereThreadsWouldShareACpu) {
  const auto all = range(0, 8);
  EXPECT_TRUE(plan_thread_cpus(all, 8, 8, 0, 1, ThreadBinding::None).empty());
  for (ThreadBinding bind : {ThreadBinding::Auto, ThreadBinding::Cores}) {
    EXPECT_TRUE(plan_thread_cpus(all, 8, 9, 0, 1, bind).empty());
    EXPECT_TRUE(plan_thread_cpus(all, 8, 5, 1, 2, bind).empty());  // 5..9
    // Three stages of one thread on two CPUs: the first two pinned would crowd the third.
    EXPECT_TRUE(plan_thread_cpus(range(0, 2), 2, 1, 0, 3, bind).empty());
    EXPECT_TRUE(plan_thread_cpus(all, 8, 3, 0, 3, bind).empty());
    EXPECT_TRUE(plan_thread_cpus(all, 8, 0, 0, 1, bind).empty());
    EXPECT_TRUE(plan_thread_cpus(all, 8, 1, 2, 2, bind).empty());  // no such slot
    EXPECT_TRUE(plan_thread_cpus({}, 8, 1, 0, 1, bind).empty());
  }
}

TEST(CpuThreads, AProcessBoundByItsLauncherPinsWithinItsOwnMask) {
  // mpirun --bind-to core: rank 1 of 2 sees its one CPU, not the machine's.
  EXPECT_EQ(plan_thread_cpus({5}, 8, 1, 1, 2, ThreadBinding::Auto), (std::vector<int>{5}));
  EXPECT_EQ(plan_thread_cpus({4, 5}, 8, 2, 1, 4, ThreadBinding::Auto), (std::vector<int>{4, 5}));
  // A container's 4 CPUs shared by 8 unbound ranks of 1 thread: nobody pins.
  EXPECT_TRUE(plan_thread_cpus(range(0, 4), 64, 1, 0, 8, ThreadBinding::Cores).empty());
  EXPECT_TRUE(plan_thread_cpus(range(0, 4), 64, 1, 7, 8, ThreadBinding::Cores).empty());
  // ... and a mask that fits the job side by side is shared, as on a whole machine.
  EXPECT_EQ(plan_thread_cpus({4, 5}, 8, 1, 1, 2, ThreadBinding::Auto), (std::vector<int>{5}));
  EXPECT_TRUE(plan_thread_cpus({4, 5, 6, 7}, 8, 1, 1, 2, ThreadBinding::Auto).empty());  // share 2
}

TEST(CpuThreads, UsableCpusAreThisProcessesMask) {
  const auto usable = usable_cpus();
  ASSERT_FALSE(usable.empty());
  std::vector<int> sorted = usable;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::set<int>(sorted.begin(), sorted.end()).size(), sorted.size());
  EXPECT_EQ(sorted, own_cpus());
}

TEST(CpuThreads, BindingNamesAreChecked) {
  EXPECT_EQ(parse_thread_binding("auto"), ThreadBinding::Auto);
  EXPECT_EQ(parse_thread_binding("cores"), ThreadBinding::Cores);
  EXPECT_EQ(parse_thread_binding("none"), ThreadBinding::None);
  try {
    parse_thread_binding("numa");
    FAIL() << "accepted 'numa'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-bind"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'numa'"), std::string::npos) << e.what();
  }
}

// A pass on a thread that did not configure the threads (the server's engine thread) runs with
// the configured count, pinned as planned, and gives the thread its affinity back afterwards;
// the default count pins under auto.
TEST(CpuThreads, APassOnAnotherThreadRunsAsConfiguredAndPinned) {
  const auto usable = usable_cpus();
  const int threads = std::min<int>(static_cast<int>(usable.size()), 4);
  ASSERT_EQ(configure_threads(threads, ThreadBinding::Cores), threads);
  const std::vector<int> plan = thread_cpus();
  ASSERT_EQ(plan, std::vector<int>(usable.begin(), usable.begin() + threads));

  std::thread engine([&] {
    const std::vector<int> before = own_cpus();
    for (int pass = 0; pass < 2; ++pass) {  // the second pass reuses the pinned pool
      ScopedComputeThread pinned;
      EXPECT_EQ(own_cpus(), std::vector<int>{plan[0]});
      std::vector<std::vector<int>> seen(threads);
      int team = 0;
#pragma omp parallel
      {
#pragma omp single
        team = omp_get_num_threads();
        seen[omp_get_thread_num()] = own_cpus();
      }
      ASSERT_EQ(team, threads);
      for (int t = 0; t < threads; ++t) EXPECT_EQ(seen[t], std::vector<int>{plan[t]}) << t;
    }
    EXPECT_EQ(own_cpus(), before);
  });
  engine.join();

  // --cpu-bind none: the count still reaches the pass's thread; nothing is pinned.
  ASSERT_EQ(configure_threads(1, ThreadBinding::None), 1);
  EXPECT_TRUE(thread_cpus().empty());
  std::thread other([&] {
    ScopedComputeThread pass;
    EXPECT_EQ(omp_get_max_threads(), 1);
  });
  other.join();

  const int all = configure_threads(0, ThreadBinding::Auto);
  EXPECT_EQ(all, static_cast<int>(usable.size()));
  EXPECT_EQ(thread_cpus(), usable);
  configure_threads(0, ThreadBinding::None);
}

}  // namespace
}  // namespace strata::cpu
