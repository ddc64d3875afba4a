// parallel::Team and resolve_threads: every loop visits each item exactly once, single() runs
// its body once per team, leader() once on the calling thread, small calls and calls from a caller's own region stay on
// one thread.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "attnkit/parallel/team.hpp"

namespace attnkit::parallel {
namespace {

TEST(Team, LoopsVisitEveryItemOnceAndSingleRunsOnce) {
  for (const int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    std::vector<std::atomic<int>> static_hits(1000), dynamic_hits(1000);
    std::atomic<int> singles{0}, members{0};
    parallel_region(threads, [&](Team& team) {
      members.fetch_add(1);
      team.for_each_static(1000, [&](index_t i) { static_hits[static_cast<std::size_t>(i)].fetch_add(1); });
      team.single([&] { singles.fetch_add(1); });
      team.for_each_dynamic(1000, [&](index_t i) { dynamic_hits[static_cast<std::size_t>(i)].fetch_add(1); });
    });
    for (std::size_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(static_hits[i].load(), 1) << i;
      ASSERT_EQ(dynamic_hits[i].load(), 1) << i;
    }
    EXPECT_EQ(singles.load(), 1);
#if defined(_OPENMP)
    EXPECT_EQ(members.load(), threads);
#endif
  }
}

/// What single() builds is visible to every member after it (its implicit barrier).
TEST(Team, SingleIsFollowedByABarrier) {
  int shared = 0;
  std::atomic<int> saw{0};
  parallel_region(2, [&](Team& team) {
    team.single([&] { shared = 42; });
    if (shared == 42) saw.fetch_add(1);
  });
#if defined(_OPENMP)
  EXPECT_EQ(saw.load(), 2);
#else
  EXPECT_EQ(saw.load(), 1);
#endif
}

/// leader() runs its body once, always on the thread that opened the region, and every
/// member sees what it built afterwards.
TEST(Team, LeaderRunsOnTheCallingThreadAndIsFollowedByABarrier) {
  const std::thread::id caller = std::this_thread::get_id();
  for (const int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    for (int repeat = 0; repeat < 20; ++repeat) {
      int shared = 0;
      std::atomic<int> runs{0}, saw{0}, members{0};
      std::atomic<bool> on_caller{true};
      parallel_region(threads, [&](Team& team) {
        members.fetch_add(1);
        team.leader([&] {
          runs.fetch_add(1);
          on_caller = on_caller && std::this_thread::get_id() == caller;
          shared = 42;
        });
        if (shared == 42) saw.fetch_add(1);
      });
      ASSERT_EQ(runs.load(), 1);
      ASSERT_TRUE(on_caller.load());
      ASSERT_EQ(saw.load(), members.load());
    }
  }
}

TEST(ResolveThreads, SmallCallsAndNestedCallsStayOnOneThread) {
  EXPECT_EQ(resolve_threads(4, 0.0), 1);
  EXPECT_EQ(resolve_threads(4, 2.5 * kMinFlopsPerExtraThread), 3);
  EXPECT_EQ(resolve_threads(2, 1e12), 2);
#if defined(_OPENMP)
  std::atomic<int> nested{0};
#pragma omp parallel num_threads(2)
  { nested.fetch_add(resolve_threads(2, 1e12)); }
  // Two members resolve to 1 each (a region of one, were the runtime to give only one
  // thread, is not "in parallel" and may use 2: the sum is 2 either way, 4 when broken).
  EXPECT_EQ(nested.load(), 2);
#endif
}

}  // namespace
}  // namespace attnkit::parallel
