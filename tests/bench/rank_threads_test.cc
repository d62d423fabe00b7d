// -t's rank threads (bench/perf/rank_threads): ranks numbered process x threads + thread, one
// communicator each; a failed rank ends the run, and one whose peers are stuck in a collective
// ends it within the grace period instead of their timeout.
#include "bench/perf/rank_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "common/error.h"

namespace braid::bench {
namespace {

struct Errors {
  std::mutex mutex;
  std::set<int> ranks;
  RankError record() {
    return [this](int rank, const std::exception&) {
      std::lock_guard<std::mutex> lock(mutex);
      ranks.insert(rank);
    };
  }
};

std::unique_ptr<World> alone() { return World::join(Options{}, false); }

TEST(RankThreads, EveryThreadIsARankOfOneJob) {
  auto process = alone();
  std::atomic<int> rankSum{0};
  Errors errors;
  auto code = runThreadRanks(
      *process, 3, Options{}, "test",
      [&](World& w) {
        EXPECT_EQ(w.size(), 3);
        EXPECT_EQ(w.launcher(), "single");
        EXPECT_FALSE(w.mpiActive());
        rankSum += w.rank();
        // A collective over the threads' communicators: they form one job.
        EXPECT_EQ(w.sumOverRanks(w.rank() + 1), 6);
        return w.rank() == 2 ? 1 : 0;  // the largest code wins
      },
      errors.record());
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_EQ(rankSum.load(), 0 + 1 + 2);
  EXPECT_TRUE(errors.ranks.empty());
}

TEST(RankThreads, RanksThatAllFailAreEachReported) {
  auto process = alone();
  Errors errors;
  auto code = runThreadRanks(
      *process, 2, Options{}, "test",
      [](World& w) -> int { fail(ErrorCode::kInvalidUsage, "rank {} refuses", w.rank()); },
      errors.record());
  EXPECT_FALSE(code.has_value());
  EXPECT_EQ(errors.ranks, (std::set<int>{0, 1}));
}

TEST(RankThreadsDeathTest, OneFailedRankEndsTheProcessWhilePeersAreStuck) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto process = alone();
        Errors errors;
        runThreadRanks(
            *process, 2, Options{}, "test",
            [](World& w) {
              if (w.rank() == 1) fail(ErrorCode::kInvalidUsage, "rank 1 gives up");
              w.helper().barrier();  // waits for rank 1 until braid's timeout (60 s)
              return 0;
            },
            errors.record());
        std::_Exit(0);  // not reached: the grace period ends the process first
      },
      testing::ExitedWithCode(1),
      "test: rank 1 failed; 1 rank thread\\(s\\) of this process still running 3 s later");
}

}  // namespace
}  // namespace braid::bench
