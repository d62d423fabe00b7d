// What only the shm transport does (conformance_test.cc has what every backend does): a segment
// left by a crashed run is replaced.
#include <gtest/gtest.h>

#include "tests/transport/test_support.h"

namespace braid::transport::testing {
namespace {

TEST(ShmProcesses, StaleSegmentOfADeadRunIsReplaced) {
  TempDir tmp;
  const std::string& dir_ = tmp.path;
  const std::string jobId = uniqueJobId("stale");
  // A rank that dies between creating its inbox and unlinking it (its peer never comes).
  pid_t child = forkChild([&] {
    FileKeyValue kv(dir_);
    connect(makeConfig(0, 2, {Kind::kShm, Kind::kShm}, jobId), kv);
    return 0;
  });
  ASSERT_GT(child, 0);
  Deadline deadline = Deadline::after(10);
  while (shmEntries("braid-" + jobId + "-0").empty() && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child, Deadline::after(5)), -SIGKILL);
  ASSERT_EQ(shmEntries("braid-" + jobId + "-").size(), 1u) << "the crash left its inbox";
  // A new run with the same jobId takes the name over, saying so once.
  MemoryKeyValue kv;
  ::testing::internal::CaptureStderr();
  auto errors = runRanks(2, [&](int rank) {
    auto ep = connect(makeConfig(rank, 2, {Kind::kShm, Kind::kShm}, jobId), kv);
    EXPECT_TRUE(ep->peerAlive(1 - rank));
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("removing stale shm segment"), std::string::npos) << log;
  EXPECT_TRUE(shmEntries("braid-" + jobId + "-").empty());
}

}  // namespace
}  // namespace braid::transport::testing
