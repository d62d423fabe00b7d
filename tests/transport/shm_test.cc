// What only the shm transport does (conformance_test.cc has what every backend does): a segment
// left by a crashed run is replaced.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

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

// The sender times the receiver's counter line while its ring is full (transport/line_latency.h):
// unknown (0) before, a measured time once the receiver has freed slots often enough.
TEST(ShmThreads, SenderMeasuresTheReceiversLineWhileItsRingIsFull) {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("line");
  constexpr int kMessages = 200;
  uint32_t before = 1, after = 0;
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, {Kind::kShm, Kind::kShm}, jobId);
    c.slots = 2;
    c.slotBytes = 4096;
    auto ep = connect(c, kv);
    const Deadline deadline = Deadline::after(30);
    if (rank == 0) {
      SendChannel& out = ep->send(1, 0);
      before = out.receiverLineNanos();
      for (int i = 0; i < kMessages; ++i) {
        void* slot = nullptr;
        while ((slot = out.tryAcquire()) == nullptr) {
          if (deadline.expired()) fail(ErrorCode::kTimeout, "rank 0: no free slot");
        }
        std::memset(slot, i, 64);
        out.post(64, MessageMeta{});
      }
      after = out.receiverLineNanos();
    } else {
      RecvChannel& in = ep->recv(0, 0);
      for (int i = 0; i < kMessages; ++i) {
        while (in.tryPeek(nullptr, nullptr) == nullptr) {
          if (deadline.expired()) fail(ErrorCode::kTimeout, "rank 1: message {} missing", i);
        }
        // Slower than the sender, so that its ring is full when this frees a slot.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        in.release();
      }
    }
  });
  expectOk(errors);
  EXPECT_EQ(before, 0u);
  EXPECT_GT(after, 0u) << "no sample: the ring was never seen full with a moved counter";
  EXPECT_LT(after, 10u * 1000 * 1000) << "a cache line that took 10 ms";
}

}  // namespace
}  // namespace braid::transport::testing
