// The ucx transport: ranks as threads and as forked processes over UCX_TLS=tcp and =sm, every
// channel, pipelining, the doorbell, a killed peer, abort, config errors. Skips where the build has
// no UCX.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <memory>

#include "common/config.h"
#include "tests/support/skip.h"
#include "tests/transport/test_support.h"

namespace braid::transport::testing {
namespace {

#define SKIP_WITHOUT_UCX()                                         \
  do {                                                             \
    std::string why;                                               \
    if (!kindAvailable(Kind::kUcx, &why)) BRAID_SKIP_MISSING(why); \
  } while (0)

/// Sets UCX_TLS for the UCX contexts this test creates (threads) or forks (children inherit it).
void useTls(const std::string& tls) { setenv("UCX_TLS", tls.c_str(), 1); }

std::vector<Kind> allUcx(int ranks) { return std::vector<Kind>(ranks, Kind::kUcx); }

TEST(UcxKind, NameAndAvailability) {
  Kind kind = Kind::kSelf;
  EXPECT_TRUE(parseKind("ucx", &kind));
  EXPECT_EQ(kind, Kind::kUcx);
  EXPECT_STREQ(kindName(Kind::kUcx), "ucx");
  std::string why;
  EXPECT_EQ(kindAvailable(Kind::kUcx, &why), BRAID_HAVE_UCX != 0);
  EXPECT_TRUE(kindAvailable(Kind::kTcp));
  if (!BRAID_HAVE_UCX) {
    EXPECT_NE(why.find("UCX"), std::string::npos) << why;
    MemoryKeyValue kv;
    try {
      connect(makeConfig(0, 2, allUcx(2), uniqueJobId("noucx")), kv);
      ADD_FAILURE() << "ucx accepted without UCX";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
      EXPECT_NE(std::string(e.what()).find("no UCX"), std::string::npos) << e.what();
    }
  }
}

TEST(UcxConfig, MissingPeerTimesOutNamingIt) {
  SKIP_WITHOUT_UCX();
  useTls("tcp");
  MemoryKeyValue kv;
  EndpointConfig c = makeConfig(0, 2, allUcx(2), uniqueJobId("missing"));
  c.timeoutSeconds = 0.5;
  try {
    connect(c, kv);
    ADD_FAILURE() << "connected without a peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer rank 1"), std::string::npos) << e.what();
  }
}

TEST(UcxConfig, WrongSecretIsNotAPeer) {
  SKIP_WITHOUT_UCX();
  useTls("tcp");
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("secret");
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, allUcx(2), jobId);
    c.timeoutSeconds = 1.5;
    if (rank == 1) c.secret = "wrong";
    connect(c, kv);
  });
  // Each side times out waiting for a valid hello, or (the one that times out second) sees the
  // other close its endpoint first; either way the error names the peer.
  for (int r = 0; r < 2; ++r) {
    const std::string peer = std::to_string(1 - r);
    EXPECT_TRUE(errors[r].find("timed out waiting for the hello of peer rank(s) " + peer) !=
                    std::string::npos ||
                errors[r].find("connection to peer rank " + peer + " failed") != std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

TEST(UcxConfig, OversizedPostAndPostWithoutSlotAreUsageErrors) {
  SKIP_WITHOUT_UCX();
  useTls("tcp");
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("usage");
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, allUcx(2), jobId);
    c.slotBytes = 256;
    auto ep = connect(c, kv);
    if (rank == 0) {
      SendChannel& out = ep->send(1, 0);
      try {
        out.post(8, MessageMeta{});
        throw std::runtime_error("post without tryAcquire accepted");
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kInvalidUsage) throw;
      }
      ASSERT_NE(out.tryAcquire(), nullptr);
      try {
        out.post(257, MessageMeta{});
        throw std::runtime_error("oversized post accepted");
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kInvalidUsage) throw;
        EXPECT_NE(std::string(e.what()).find("257"), std::string::npos) << e.what();
      }
      try {
        ep->recv(1, 0).release();
        throw std::runtime_error("release with nothing peeked accepted");
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kInvalidUsage) throw;
      }
    }
  });
  expectOk(errors);
}

struct Case {
  const char* tls;
  int ranks;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string tls = info.param.tls;
  for (char& c : tls) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return fmt::format("{}_{}ranks", tls, info.param.ranks);
}

class UcxThreads : public ::testing::TestWithParam<Case> {};

TEST_P(UcxThreads, EveryPairEveryChannelEveryByte) {
  SKIP_WITHOUT_UCX();
  const Case param = GetParam();
  useTls(param.tls);
  const size_t slotBytes = 3000;
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("pairs");
  std::barrier sync(param.ranks);
  auto errors = runRanks(param.ranks, [&](int rank) {
    EndpointConfig c = makeConfig(rank, param.ranks, allUcx(param.ranks), jobId);
    c.channels = 2;
    c.slots = 4;
    c.slotBytes = slotBytes;
    std::unique_ptr<Endpoint> ep;
    try {
      ep = connect(c, kv);
    } catch (...) {
      sync.arrive_and_drop();
      throw;
    }
    EXPECT_EQ(ep->peerKind((rank + 1) % param.ranks), Kind::kUcx);
    try {
      exchangeAll(*ep, 120, slotBytes, 30);
    } catch (...) {
      sync.arrive_and_drop();
      throw;
    }
    sync.arrive_and_wait();  // nobody tears down while others still receive
  });
  expectOk(errors);
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxThreads,
                         ::testing::Values(Case{"tcp", 2}, Case{"tcp", 4}, Case{"sm,self", 2},
                                           Case{"sm,self", 4}),
                         caseName);

class UcxTls : public ::testing::TestWithParam<const char*> {};

std::string tlsName(const ::testing::TestParamInfo<const char*>& info) {
  std::string tls = info.param;
  for (char& c : tls) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return tls;
}

// K slots in flight and no more until the receiver releases; big slots go by rendezvous.
TEST_P(UcxTls, SlotFlowControlAndPipelining) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("flow");
  const int k = 4;
  const size_t slotBytes = 1 << 20;
  std::atomic<int> stage{0};
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, allUcx(2), jobId);
    c.channels = 1;
    c.slots = k;
    c.slotBytes = slotBytes;
    auto ep = connect(c, kv);
    if (rank == 0) {
      SendChannel& out = ep->send(1, 0);
      for (int i = 0; i < k; ++i) {
        void* slot = nullptr;
        ASSERT_TRUE(waitFor(
            *ep, [&] { return (slot = out.tryAcquire()) != nullptr; }, 10));
        fillPayload(slot, slotBytes, 100 + i);
        MessageMeta meta;
        meta.words[0] = i;
        out.post(slotBytes, meta);
      }
      // All K slots are in flight: none until the receiver releases one.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_EQ(out.tryAcquire(), nullptr);
      stage = 1;
      void* slot = nullptr;
      ASSERT_TRUE(waitFor(
          *ep, [&] { return (slot = out.tryAcquire()) != nullptr; }, 10));
      EXPECT_GE(stage.load(), 2) << "a slot came back before the receiver released one";
      fillPayload(slot, 5, 200);
      MessageMeta meta;
      meta.words[0] = k;
      out.post(5, meta);
      ASSERT_TRUE(waitFor(
          *ep, [&] { return stage.load() == 3; }, 10));
    } else {
      RecvChannel& in = ep->recv(0, 0);
      // Wait until all K arrived before releasing any.
      ASSERT_TRUE(waitFor(
          *ep, [&] { return stage.load() == 1; }, 10));
      for (int i = 0; i < k; ++i) {
        const void* data = nullptr;
        size_t bytes = 0;
        MessageMeta meta;
        ASSERT_TRUE(waitFor(
            *ep, [&] { return (data = in.tryPeek(&bytes, &meta)) != nullptr; }, 10));
        EXPECT_EQ(bytes, slotBytes);
        EXPECT_EQ(meta.words[0], static_cast<uint64_t>(i));
        EXPECT_EQ(checkPayload(data, bytes, 100 + i), -1) << "message " << i;
        if (i == 0) stage = 2;
        in.release();
      }
      const void* data = nullptr;
      size_t bytes = 0;
      MessageMeta meta;
      ASSERT_TRUE(waitFor(
          *ep, [&] { return (data = in.tryPeek(&bytes, &meta)) != nullptr; }, 10));
      EXPECT_EQ(bytes, 5u);
      EXPECT_EQ(meta.words[0], static_cast<uint64_t>(k));
      EXPECT_EQ(checkPayload(data, bytes, 200), -1);
      in.release();
      stage = 3;
    }
  });
  expectOk(errors);
}

TEST_P(UcxTls, DoorbellWakesASleepingReceiver) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("bell");
  std::atomic<bool> asleep{false};
  double wokeAfterPost = -1;
  auto errors = runRanks(2, [&](int rank) {
    auto ep = connect(makeConfig(rank, 2, allUcx(2), jobId), kv);
    if (rank == 1) {
      RecvChannel& in = ep->recv(0, 0);
      uint32_t ticket = ep->prepareSleep();
      ASSERT_EQ(in.tryPeek(nullptr, nullptr), nullptr);
      asleep = true;
      // One long sleep: only the doorbell can end it early (spurious wake-ups are allowed, so
      // loop, but each sleep is 5 s long).
      Deadline deadline = Deadline::after(5);
      while (in.tryPeek(nullptr, nullptr) == nullptr && !deadline.expired()) {
        ep->sleep(ticket, deadline.when());
        ticket = ep->prepareSleep();
      }
      ep->sleep(ticket, Clock::now());
      const void* data = in.tryPeek(nullptr, nullptr);
      ASSERT_NE(data, nullptr) << "not woken within 5 s";
      uint64_t sentAt = 0;
      std::memcpy(&sentAt, data, 8);
      wokeAfterPost = std::chrono::duration<double>(Clock::now().time_since_epoch()).count() -
                      static_cast<double>(sentAt) / 1e9;
      in.release();
    } else {
      while (!asleep) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the receiver sleeps by now
      SendChannel& out = ep->send(1, 0);
      void* slot = out.tryAcquire();
      ASSERT_NE(slot, nullptr);
      uint64_t now = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count());
      std::memcpy(slot, &now, 8);
      out.post(8, MessageMeta{});
      // Stay connected until the message is consumed (its credit comes back).
      ASSERT_TRUE(waitFor(
          *ep, [&] { return out.tryAcquire() != nullptr; }, 10));
    }
  });
  expectOk(errors);
  EXPECT_GE(wokeAfterPost, 0);
  EXPECT_LT(wokeAfterPost, 1.0) << "the receiver slept through the post";
}

TEST_P(UcxTls, SignalAbortReachesThePeer) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("abort");
  std::atomic<bool> seen{false};
  auto errors = runRanks(3, [&](int rank) {
    auto ep = connect(makeConfig(rank, 3, allUcx(3), jobId), kv);
    if (rank == 0) {
      EXPECT_FALSE(ep->peerAbort().has_value());
      ep->signalAbort("2|rank 0 gave up");
      ep->signalAbort("second call is ignored");
      ASSERT_TRUE(waitFor(
          *ep, [&] { return seen.load(); }, 10));
    } else {
      std::optional<std::pair<int, std::string>> abort;
      ASSERT_TRUE(waitFor(
          *ep, [&] { return (abort = ep->peerAbort()).has_value(); }, 5))
          << "rank " << rank << " never saw the abort";
      EXPECT_EQ(abort->first, 0);
      EXPECT_EQ(abort->second, "2|rank 0 gave up");
      if (rank == 1) {
        // Let rank 2 see it too before rank 0 leaves.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        seen = true;
      }
    }
  });
  expectOk(errors);
}

// shm between ranks {0,1} and {2,3}, ucx across: one doorbell for both.
TEST_P(UcxTls, MixedWithShmBehindOneEndpoint) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("mixed");
  const int ranks = 4;
  std::barrier sync(ranks);
  auto errors = runRanks(ranks, [&](int rank) {
    std::vector<Kind> kinds(ranks);
    for (int p = 0; p < ranks; ++p) kinds[p] = p / 2 == rank / 2 ? Kind::kShm : Kind::kUcx;
    EndpointConfig c = makeConfig(rank, ranks, kinds, jobId);
    c.slotBytes = 4096;
    c.slots = 3;
    std::unique_ptr<Endpoint> ep;
    try {
      ep = connect(c, kv);
      EXPECT_EQ(ep->peerKind(rank ^ 1), Kind::kShm);
      EXPECT_EQ(ep->peerKind((rank + 2) % ranks), Kind::kUcx);
      exchangeAll(*ep, 60, c.slotBytes, 30);
    } catch (...) {
      sync.arrive_and_drop();
      throw;
    }
    sync.arrive_and_wait();
  });
  expectOk(errors);
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxTls, ::testing::Values("tcp", "sm,self"), tlsName);

class UcxProcesses : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/braid-ucx-kv-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(UcxProcesses, TwoAndFourRanksMoveEveryByte) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  for (int ranks : {2, 4}) {
    const std::string jobId = uniqueJobId("procs");
    std::vector<pid_t> children;
    for (int r = 0; r < ranks; ++r) {
      children.push_back(forkRank([&, r] {
        FileKeyValue kv(dir_);
        EndpointConfig c = makeConfig(r, ranks, allUcx(ranks), jobId);
        c.channels = 2;
        c.slots = 4;
        c.slotBytes = 64 << 10;
        auto ep = connect(c, kv);
        exchangeAll(*ep, 100, c.slotBytes, 40);
        // Everyone finished receiving before anyone tears down.
        kv.set(fmt::format("{}/done/{}", jobId, r), "1");
        for (int p = 0; p < ranks; ++p) {
          kv.get(fmt::format("{}/done/{}", jobId, p), Deadline::after(30));
        }
        return 0;
      }));
    }
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(waitChild(children[r], 60), 0) << ranks << " ranks: rank " << r;
    }
  }
}

void killedPeerIsSeenDead(const std::string& dir) {
  const std::string jobId = uniqueJobId("death");
  pid_t child = forkRank([&] {
    FileKeyValue kv(dir);
    auto ep = connect(makeConfig(1, 2, allUcx(2), jobId), kv);
    std::this_thread::sleep_for(std::chrono::seconds(20));  // bounded: the test kills it first
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(dir);
  std::unique_ptr<Endpoint> ep;
  try {
    ep = connect(makeConfig(0, 2, allUcx(2), jobId), kv);
  } catch (const std::exception& e) {
    kill(child, SIGKILL);
    waitChild(child, 5);
    FAIL() << e.what();
  }
  EXPECT_TRUE(ep->peerAlive(1));
  kill(child, SIGKILL);
  auto start = Clock::now();
  bool dead = false;
  Deadline deadline = Deadline::after(3.0);
  while (!deadline.expired() && !(dead = !ep->peerAlive(1) || ep->peerAbort().has_value())) {
    uint32_t ticket = ep->prepareSleep();
    ep->sleep(ticket, Clock::now() + std::chrono::milliseconds(20));
  }
  double millis = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_TRUE(dead) << "peer still alive after " << millis << " ms";
  EXPECT_EQ(waitChild(child, 5), -SIGKILL);
  EXPECT_FALSE(ep->peerAlive(1)) << "stays dead after the reap";
  // Sending to it is no error and no hang; destroying is bounded.
  if (void* slot = ep->send(1, 0).tryAcquire()) {
    std::memset(slot, 1, 64);
    ep->send(1, 0).post(64, MessageMeta{});
  }
  auto before = Clock::now();
  ep.reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - before).count(), 3.0);
  ::testing::Test::RecordProperty("death_ms", fmt::format("{:.1f}", millis));
}

// On one host the kernel reports the death (UCX's error mode is none there).
TEST_P(UcxProcesses, KilledPeerIsSeenDeadWithinSeconds) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  killedPeerIsSeenDead(dir_);
}

// Between hosts UCX itself reports it (error mode peer, the endpoint's error callback).
TEST_F(UcxProcesses, KilledPeerIsReportedByUcxInPeerErrorMode) {
  SKIP_WITHOUT_UCX();
  useTls("tcp");
  setenv("BRAID_UCX_ERR_MODE", "peer", 1);
  killedPeerIsSeenDead(dir_);
  unsetenv("BRAID_UCX_ERR_MODE");
}

TEST_P(UcxProcesses, DestroyingWithAFrozenPeerIsBounded) {
  SKIP_WITHOUT_UCX();
  useTls(GetParam());
  const std::string jobId = uniqueJobId("frozen");
  const size_t slotBytes = 1 << 20;
  pid_t child = forkRank([&] {
    FileKeyValue kv(dir_);
    EndpointConfig c = makeConfig(1, 2, allUcx(2), jobId);
    c.slotBytes = slotBytes;
    auto ep = connect(c, kv);
    std::this_thread::sleep_for(std::chrono::seconds(20));  // bounded: the test kills it first
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(dir_);
  EndpointConfig c = makeConfig(0, 2, allUcx(2), jobId);
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

INSTANTIATE_TEST_SUITE_P(Ucx, UcxProcesses, ::testing::Values("tcp", "sm,self"), tlsName);

}  // namespace
}  // namespace braid::transport::testing
