// Ranks as threads: every pair and channel, flow control, the doorbell, abort, many ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <memory>

#include "tests/transport/test_support.h"
#include "transport/shm/shm.h"

namespace braid::transport::testing {
namespace {

TEST(TransportKind, NamesRoundTrip) {
  Kind kind;
  EXPECT_TRUE(parseKind("shm", &kind));
  EXPECT_EQ(kind, Kind::kShm);
  EXPECT_TRUE(parseKind("tcp", &kind));
  EXPECT_EQ(kind, Kind::kTcp);
  EXPECT_TRUE(parseKind("ucx", &kind));
  EXPECT_EQ(kind, Kind::kUcx);
  EXPECT_FALSE(parseKind("verbs", &kind));
  EXPECT_STREQ(kindName(Kind::kShm), "shm");
  EXPECT_STREQ(kindName(Kind::kTcp), "tcp");
  EXPECT_STREQ(kindName(Kind::kSelf), "self");
}

TEST(TransportConfig, RejectsBadConfig) {
  MemoryKeyValue kv;
  EndpointConfig c = makeConfig(0, 2, {Kind::kSelf, Kind::kShm}, uniqueJobId("bad"));
  c.peerKinds = {Kind::kShm, Kind::kShm};
  EXPECT_THROW(connect(c, kv), Error);
  c = makeConfig(0, 2, {Kind::kSelf, Kind::kShm}, "");
  EXPECT_THROW(connect(c, kv), Error);
  c = makeConfig(0, 2, {Kind::kSelf, Kind::kShm}, uniqueJobId("bad"));
  c.timeoutSeconds = 0;
  EXPECT_THROW(connect(c, kv), Error);
  c = makeConfig(0, 2, {Kind::kSelf, Kind::kShm}, uniqueJobId("bad"));
  c.slots = 0;
  try {
    connect(c, kv);
    ADD_FAILURE() << "zero slots accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
}

struct Case {
  Kind kind;
  int ranks;
};

class AllPairsTest : public ::testing::TestWithParam<Case> {};

TEST_P(AllPairsTest, EveryPairEveryChannelInOrder) {
  const Case param = GetParam();
  const size_t slotBytes = 1000;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("pairs");
  std::barrier sync(param.ranks);
  std::vector<char> leftovers(param.ranks, 0);
  auto errors = runRanks(param.ranks, [&](int rank) {
    EndpointConfig c =
        makeConfig(rank, param.ranks, std::vector<Kind>(param.ranks, param.kind), jobId);
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
    sync.arrive_and_wait();  // every rank connected: no inbox may be left in /dev/shm
    leftovers[rank] = !shmEntries("braid-" + jobId + "-").empty();
    EXPECT_EQ(ep->rank(), rank);
    EXPECT_EQ(ep->size(), param.ranks);
    EXPECT_EQ(ep->channels(), 2);
    EXPECT_EQ(ep->peerKind((rank + 1) % param.ranks), param.kind);
    exchangeAll(*ep, 150, slotBytes, 30);
    sync.arrive_and_wait();  // nobody tears down while others still receive
  });
  expectOk(errors);
  for (int r = 0; r < param.ranks; ++r) EXPECT_FALSE(leftovers[r]) << "segments left in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(Transports, AllPairsTest,
                         ::testing::Values(Case{Kind::kShm, 2}, Case{Kind::kShm, 3},
                                           Case{Kind::kShm, 5}, Case{Kind::kTcp, 2},
                                           Case{Kind::kTcp, 3}, Case{Kind::kTcp, 5}),
                         [](const auto& info) {
                           return fmt::format("{}_{}ranks", kindName(info.param.kind),
                                              info.param.ranks);
                         });

class KindTest : public ::testing::TestWithParam<Kind> {};

TEST_P(KindTest, SlotFlowControl) {
  const Kind kind = GetParam();
  const int k = 4;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("flow");
  std::atomic<int> phase{0};
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, {kind, kind}, jobId);
    c.channels = 1;
    c.slots = k;
    c.slotBytes = 64;
    auto ep = connect(c, kv);
    if (rank == 0) {
      SendChannel& out = ep->send(1, 0);
      for (int i = 0; i < k; ++i) {
        void* slot = out.tryAcquire();
        ASSERT_NE(slot, nullptr) << "slot " << i;
        EXPECT_EQ(out.tryAcquire(), slot) << "acquire twice gives the same slot";
        std::memset(slot, i, 8);
        MessageMeta meta;
        meta.words[0] = static_cast<uint64_t>(i);
        out.post(8, meta);
      }
      EXPECT_EQ(out.tryAcquire(), nullptr) << "K messages in flight";
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      EXPECT_EQ(out.tryAcquire(), nullptr) << "still full while nobody released";
      phase.store(1);
      // The receiver frees one slot: it comes back (the doorbell wakes us for it).
      EXPECT_TRUE(waitFor(
          *ep, [&] { return out.tryAcquire() != nullptr; }, 5));
      void* slot = out.tryAcquire();
      ASSERT_NE(slot, nullptr);
      std::memset(slot, k, 8);
      MessageMeta meta;
      meta.words[0] = k;
      out.post(8, meta);
      EXPECT_EQ(out.tryAcquire(), nullptr) << "full again after reusing the freed slot";
      phase.store(2);
      EXPECT_TRUE(waitFor(
          *ep, [&] { return phase.load() == 3; }, 10));
    } else {
      RecvChannel& in = ep->recv(0, 0);
      EXPECT_TRUE(waitFor(
          *ep, [&] { return phase.load() == 1; }, 10));
      for (int i = 0; i <= k; ++i) {
        if (i == 1) {
          EXPECT_TRUE(waitFor(
              *ep, [&] { return phase.load() == 2; }, 10));
        }
        size_t bytes = 0;
        MessageMeta meta;
        EXPECT_TRUE(waitFor(
            *ep, [&] { return in.tryPeek(&bytes, &meta) != nullptr; }, 5));
        const void* data = in.tryPeek(&bytes, &meta);
        ASSERT_NE(data, nullptr);
        EXPECT_EQ(bytes, 8u);
        EXPECT_EQ(meta.words[0], static_cast<uint64_t>(i));
        EXPECT_EQ(static_cast<const unsigned char*>(data)[7], i);
        in.release();
      }
      size_t bytes;
      EXPECT_EQ(in.tryPeek(&bytes, nullptr), nullptr);
      phase.store(3);
    }
  });
  expectOk(errors);
}

TEST_P(KindTest, DoorbellWakesSleeperAndTimesOut) {
  const Kind kind = GetParam();
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("bell");
  std::atomic<int> phase{0};
  std::atomic<int64_t> postedAt{0};
  double wakeMillis = -1, timeoutMillis = -1;
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, {kind, kind}, jobId);
    c.channels = 1;
    c.slotBytes = 64;
    auto ep = connect(c, kv);
    if (rank == 0) {
      EXPECT_TRUE(waitFor(
          *ep, [&] { return phase.load() == 1; }, 10));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it reach the futex
      SendChannel& out = ep->send(1, 0);
      void* slot = out.tryAcquire();
      ASSERT_NE(slot, nullptr);
      postedAt.store(Clock::now().time_since_epoch().count());
      out.post(0, MessageMeta{});
      EXPECT_TRUE(waitFor(
          *ep, [&] { return phase.load() == 2; }, 10));
    } else {
      RecvChannel& in = ep->recv(0, 0);
      uint32_t ticket = ep->prepareSleep();
      EXPECT_EQ(in.tryPeek(nullptr, nullptr), nullptr);
      phase.store(1);
      ep->sleep(ticket, Clock::now() + std::chrono::seconds(5));
      auto woke = Clock::now();
      wakeMillis = std::chrono::duration<double, std::milli>(
                       woke - Clock::time_point(Clock::duration(postedAt.load())))
                       .count();
      EXPECT_TRUE(waitFor(
          *ep, [&] { return in.tryPeek(nullptr, nullptr) != nullptr; }, 1));
      in.release();
      // Nothing else happens now: a sleep must last until `until`.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the credit settle
      ticket = ep->prepareSleep();
      auto start = Clock::now();
      ep->sleep(ticket, start + std::chrono::milliseconds(100));
      timeoutMillis = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      phase.store(2);
    }
  });
  expectOk(errors);
  EXPECT_GE(wakeMillis, 0) << "woke before the post";
  EXPECT_LT(wakeMillis, 100) << "a post must wake a sleeping receiver within a few ms";
  EXPECT_GE(timeoutMillis, 99);
  EXPECT_LT(timeoutMillis, 1000);
  RecordProperty("wake_ms", fmt::format("{:.3f}", wakeMillis));
}

TEST_P(KindTest, PeerAbortAfterSignalAbort) {
  const Kind kind = GetParam();
  const int ranks = 3;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("abort");
  // Long enough to carry a full error message (comm sends "<code>|<message>").
  const std::string reason = "6|rank 1 failed: boom " + std::string(800, 'x');
  std::barrier sync(ranks);
  auto errors = runRanks(ranks, [&](int rank) {
    auto ep = connect(makeConfig(rank, ranks, std::vector<Kind>(ranks, kind), jobId), kv);
    sync.arrive_and_wait();
    if (rank == 1) {
      ep->signalAbort(reason);
      ep->signalAbort("second call is ignored");
      EXPECT_FALSE(ep->peerAbort().has_value());
    } else {
      EXPECT_TRUE(waitFor(
          *ep, [&] { return ep->peerAbort().has_value(); }, 5));
      auto abort = ep->peerAbort();
      ASSERT_TRUE(abort.has_value());
      EXPECT_EQ(abort->first, 1);
      EXPECT_EQ(abort->second, reason);
    }
    sync.arrive_and_wait();
  });
  expectOk(errors);
}

INSTANTIATE_TEST_SUITE_P(Transports, KindTest, ::testing::Values(Kind::kShm, Kind::kTcp),
                         [](const auto& info) { return std::string(kindName(info.param)); });

TEST(Composite, ShmWithinNodesTcpAcross) {
  const int ranks = 4;  // "nodes" {0,1} and {2,3}
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("mixed");
  std::barrier sync(ranks);
  auto errors = runRanks(ranks, [&](int rank) {
    std::vector<Kind> kinds(ranks);
    for (int p = 0; p < ranks; ++p) kinds[p] = p / 2 == rank / 2 ? Kind::kShm : Kind::kTcp;
    EndpointConfig c = makeConfig(rank, ranks, kinds, jobId);
    c.slots = 3;
    c.slotBytes = 500;
    auto ep = connect(c, kv);
    EXPECT_EQ(ep->peerKind(rank ^ 1), Kind::kShm);
    EXPECT_EQ(ep->peerKind((rank + 2) % ranks), Kind::kTcp);
    exchangeAll(*ep, 100, 500, 30);
    sync.arrive_and_wait();
  });
  expectOk(errors);
}

TEST(ManyRanks, SixteenShmRanksAsThreads) {
  const int ranks = 16;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("many");
  std::barrier sync(ranks);
  auto errors = runRanks(ranks, [&](int rank) {
    EndpointConfig c = makeConfig(rank, ranks, std::vector<Kind>(ranks, Kind::kShm), jobId);
    c.channels = 2;  // 16 x 15 x 2 = 480 channels with the default 8 x 128 KiB slots
    auto ep = connect(c, kv);
    exchangeAll(*ep, 10, c.slotBytes, 60);
    sync.arrive_and_wait();
  });
  expectOk(errors);
}

TEST(ManyRanks, EightTcpRanksAsThreads) {
  const int ranks = 8;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("manytcp");
  std::barrier sync(ranks);
  auto errors = runRanks(ranks, [&](int rank) {
    EndpointConfig c = makeConfig(rank, ranks, std::vector<Kind>(ranks, Kind::kTcp), jobId);
    c.slotBytes = 4096;
    auto ep = connect(c, kv);
    exchangeAll(*ep, 20, c.slotBytes, 60);
    sync.arrive_and_wait();
  });
  expectOk(errors);
}

TEST(ConnectTimeout, NamesTheMissingPeer) {
  MemoryKeyValue kv;
  for (Kind kind : {Kind::kShm, Kind::kTcp}) {
    EndpointConfig c = makeConfig(0, 2, {kind, kind}, uniqueJobId("lonely"));
    c.timeoutSeconds = 0.3;
    try {
      connect(c, kv);
      ADD_FAILURE() << "connect without a peer must time out";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
      EXPECT_NE(std::string(e.what()).find("peer rank 1"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(shmEntries("braid-" + c.jobId + "-").empty());
  }
}

}  // namespace
}  // namespace braid::transport::testing
