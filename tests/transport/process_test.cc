// Ranks as forked processes: 64 MiB through shm and tcp, and a peer killed with SIGKILL.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "tests/transport/test_support.h"

namespace braid::transport::testing {
namespace {

class ProcessTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/braid-transport-kv-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

uint64_t foldChecksum(uint64_t sum, const void* data, size_t bytes) {
  auto* in = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, in + i, std::min<size_t>(8, bytes - i));
    sum = (sum ^ word) * 0x100000001b3ull;
  }
  return sum;
}

TEST_P(ProcessTest, Moves64MiBInSlotSizedPieces) {
  const Kind kind = GetParam();
  const std::string jobId = uniqueJobId("bulk");
  const size_t total = size_t{64} << 20;
  auto rankMain = [&](int rank) -> int {
    FileKeyValue kv(dir_);
    EndpointConfig c = makeConfig(rank, 2, {kind, kind}, jobId);
    c.channels = 1;
    c.slots = 8;
    c.slotBytes = 128 << 10;
    auto ep = connect(c, kv);
    const size_t pieces = total / c.slotBytes;
    uint64_t sum = 0xcbf29ce484222325ull;
    if (rank == 0) {
      SendChannel& out = ep->send(1, 0);
      for (size_t i = 0; i < pieces; ++i) {
        void* slot = nullptr;
        if (!waitFor(
                *ep, [&] { return (slot = out.tryAcquire()) != nullptr; }, 20))
          return 10;
        fillPayload(slot, c.slotBytes, i);
        sum = foldChecksum(sum, slot, c.slotBytes);
        MessageMeta meta;
        meta.words[0] = i;
        meta.words[1] = sum;
        out.post(c.slotBytes, meta);
      }
      // Wait for the receiver's verdict before tearing down.
      RecvChannel& in = ep->recv(1, 0);
      MessageMeta verdict;
      if (!waitFor(
              *ep, [&] { return in.tryPeek(nullptr, &verdict) != nullptr; }, 20))
        return 11;
      return verdict.words[0] == 1 ? 0 : 12;
    }
    RecvChannel& in = ep->recv(0, 0);
    std::vector<char> expected(c.slotBytes);
    uint64_t want = 0xcbf29ce484222325ull;
    bool ok = true;
    for (size_t i = 0; i < pieces; ++i) {
      const void* data = nullptr;
      size_t bytes = 0;
      MessageMeta meta;
      if (!waitFor(
              *ep, [&] { return (data = in.tryPeek(&bytes, &meta)) != nullptr; }, 20)) {
        return 20;
      }
      sum = foldChecksum(sum, data, bytes);
      fillPayload(expected.data(), c.slotBytes, i);
      want = foldChecksum(want, expected.data(), c.slotBytes);
      ok = ok && bytes == c.slotBytes && meta.words[0] == i && meta.words[1] == sum;
      in.release();
    }
    ok = ok && sum == want;
    SendChannel& out = ep->send(0, 0);
    if (!waitFor(
            *ep, [&] { return out.tryAcquire() != nullptr; }, 20))
      return 21;
    MessageMeta verdict;
    verdict.words[0] = ok ? 1 : 0;
    out.post(0, verdict);
    ep.reset();  // tcp: flushes the verdict before closing
    return ok ? 0 : 22;
  };
  pid_t p0 = forkRank([&] { return rankMain(0); });
  pid_t p1 = forkRank([&] { return rankMain(1); });
  ASSERT_GT(p0, 0);
  ASSERT_GT(p1, 0);
  EXPECT_EQ(waitChild(p1, 60), 0) << "receiver";
  EXPECT_EQ(waitChild(p0, 60), 0) << "sender";
  EXPECT_TRUE(shmEntries("braid-" + jobId + "-").empty());
}

TEST_P(ProcessTest, KilledPeerIsSeenDeadWithinOneSecond) {
  const Kind kind = GetParam();
  const std::string jobId = uniqueJobId("death");
  pid_t child = forkRank([&] {
    FileKeyValue kv(dir_);
    auto ep = connect(makeConfig(1, 2, {kind, kind}, jobId), kv);
    std::this_thread::sleep_for(std::chrono::seconds(20));  // bounded: the test kills it first
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(dir_);
  std::unique_ptr<Endpoint> ep;
  try {
    ep = connect(makeConfig(0, 2, {kind, kind}, jobId), kv);
  } catch (const std::exception& e) {
    kill(child, SIGKILL);
    waitChild(child, 5);
    FAIL() << e.what();
  }
  EXPECT_TRUE(ep->peerAlive(1));
  // connect() returned here, so no inbox name is left, whatever the child does next.
  EXPECT_TRUE(shmEntries("braid-" + jobId + "-").empty());
  kill(child, SIGKILL);
  auto start = Clock::now();
  bool dead = false;
  Deadline deadline = Deadline::after(1.0);
  while (!deadline.expired() && !(dead = !ep->peerAlive(1))) {
    uint32_t ticket = ep->prepareSleep();
    ep->sleep(ticket, Clock::now() + std::chrono::milliseconds(20));
  }
  double millis = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_TRUE(dead) << "peer still alive after " << millis << " ms";
  EXPECT_EQ(waitChild(child, 5), -SIGKILL);
  EXPECT_FALSE(ep->peerAlive(1)) << "stays dead after the reap";
  RecordProperty("death_ms", fmt::format("{:.1f}", millis));
}

TEST_P(ProcessTest, DestroyingWithAFrozenPeerIsBounded) {
  const Kind kind = GetParam();
  const std::string jobId = uniqueJobId("frozen");
  const size_t slotBytes = 1 << 20;  // 8 x 1 MiB in flight: more than the socket buffers take
  pid_t child = forkRank([&] {
    FileKeyValue kv(dir_);
    EndpointConfig c = makeConfig(1, 2, {kind, kind}, jobId);
    c.slotBytes = slotBytes;
    auto ep = connect(c, kv);
    std::this_thread::sleep_for(std::chrono::seconds(20));  // bounded: the test kills it first
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(dir_);
  EndpointConfig c = makeConfig(0, 2, {kind, kind}, jobId);
  c.slotBytes = slotBytes;
  std::unique_ptr<Endpoint> ep;
  try {
    ep = connect(c, kv);
  } catch (const std::exception& e) {
    kill(child, SIGKILL);
    waitChild(child, 5);
    FAIL() << e.what();
  }
  kill(child, SIGSTOP);
  for (int ch = 0; ch < c.channels; ++ch) {
    SendChannel& out = ep->send(1, ch);
    while (void* slot = out.tryAcquire()) {
      std::memset(slot, 0x5a, c.slotBytes);
      out.post(c.slotBytes, MessageMeta{});
    }
  }
  auto start = Clock::now();
  ep.reset();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child, 5), -SIGKILL);
  EXPECT_LT(seconds, 3.0) << "the destructor must not wait for a frozen peer";
}

TEST_F(ProcessTest, StaleSegmentOfADeadRunIsReplaced) {
  const std::string jobId = uniqueJobId("stale");
  // A rank that dies between creating its inbox and unlinking it (its peer never comes).
  pid_t child = forkRank([&] {
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
  EXPECT_EQ(waitChild(child, 5), -SIGKILL);
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

INSTANTIATE_TEST_SUITE_P(Transports, ProcessTest, ::testing::Values(Kind::kShm, Kind::kTcp),
                         [](const auto& info) { return std::string(kindName(info.param)); });

}  // namespace
}  // namespace braid::transport::testing
