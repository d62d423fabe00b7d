// The transport conformance suite: every test here runs on every backend this build has (shm,
// tcp, ucx over UCX_TLS=tcp and =sm,self; ofi over the libfabric providers tcp;ofi_rxm, shm and
// udp;ofi_rxd, each skipping with the reason where it is not usable here, with its data as remote
// writes where the provider offers RMA and as tagged messages (BRAID_OFI_RMA=off); verbs with its
// defaults and with 2 queue pairs per peer and 4 KiB writes, skipping where there is no RDMA
// device (tools/rxe-vm runs them over Soft-RoCE: the rxe.verbs test), and both again over the
// software model of libibverbs everywhere (ranks as threads only); ucx skips where the
// build has no UCX; cuda_ipc in CUDA
// builds, skipping without a GPU, its device slots filled and read through slot_memory.h), ranks as
// threads and as forked processes: every pair and channel, flow control, the doorbell, abort, a
// missing, killed or frozen peer, bulk data. Backend-specific behaviour has its own file
// (channel_test.cc: config checks and many ranks; tcp_test.cc, shm_test.cc, ucx_test.cc).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <barrier>
#include <memory>

#include "tests/transport/test_support.h"

namespace braid::transport::testing {
namespace {

// Ranks as threads and as forked processes (with a file KeyValue in dir_), on GetParam().
class Conformance : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { USE_BACKEND(GetParam()); }
  TempDir tmp_;
  const std::string& dir_ = tmp_.path;
};

struct Case {
  Backend backend;
  int ranks;
  size_t slotBytes;
  int messages;
};

class AllPairs : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { USE_BACKEND(GetParam().backend); }
};

TEST_P(AllPairs, EveryPairEveryChannelInOrder) {
  const Case param = GetParam();
  const Kind kind = param.backend.kind;
  const size_t slotBytes = param.slotBytes;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("pairs");
  std::barrier sync(param.ranks);
  std::vector<char> leftovers(param.ranks, 0);
  auto errors = runRanks(param.ranks, [&](int rank) {
    EndpointConfig c = makeConfig(rank, param.ranks, std::vector<Kind>(param.ranks, kind), jobId);
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
    EXPECT_EQ(ep->peerKind((rank + 1) % param.ranks), kind);
    try {
      exchangeAll(*ep, param.messages, slotBytes, 30);
    } catch (...) {
      sync.arrive_and_drop();
      throw;
    }
    sync.arrive_and_wait();  // nobody tears down while others still receive
  });
  expectOk(errors);
  for (int r = 0; r < param.ranks; ++r) EXPECT_FALSE(leftovers[r]) << "segments left in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(
    Transports, AllPairs,
    ::testing::Values(Case{kShmBackend, 2, 1000, 150}, Case{kShmBackend, 3, 1000, 150},
                      Case{kShmBackend, 5, 1000, 150}, Case{kTcpBackend, 2, 1000, 150},
                      Case{kTcpBackend, 3, 1000, 150}, Case{kTcpBackend, 5, 1000, 150},
                      Case{kUcxTcpBackend, 2, 3000, 120}, Case{kUcxTcpBackend, 4, 3000, 120},
                      Case{kUcxSmBackend, 2, 3000, 120}, Case{kUcxSmBackend, 4, 3000, 120},
                      Case{kOfiTcpBackend, 2, 3000, 120}, Case{kOfiTcpBackend, 4, 3000, 120},
                      Case{kOfiTcpTaggedBackend, 2, 3000, 120},
                      Case{kOfiTcpTaggedBackend, 4, 3000, 120},
                      Case{kOfiShmBackend, 2, 3000, 120}, Case{kOfiShmBackend, 4, 3000, 120},
                      Case{kOfiShmTaggedBackend, 4, 3000, 120},
                      Case{kOfiUdpBackend, 2, 3000, 120}, Case{kOfiUdpBackend, 4, 3000, 120},
                      Case{kOfiUdpTaggedBackend, 2, 3000, 120},
                      Case{kVerbsBackend, 2, 3000, 120}, Case{kVerbsBackend, 4, 3000, 120},
                      Case{kVerbsTunedBackend, 2, 30000, 120},
                      Case{kVerbsTunedBackend, 4, 30000, 120},
                      Case{kVerbsModelBackend, 2, 3000, 120}, Case{kVerbsModelBackend, 4, 3000, 120},
                      Case{kVerbsModelTunedBackend, 2, 30000, 120},
                      Case{kVerbsModelTunedBackend, 5, 3000, 120}
#if BRAID_TEST_CUDA
                      ,
                      Case{kCudaIpcBackend, 2, 1024, 150}, Case{kCudaIpcBackend, 3, 1024, 150}
#endif
                      ),
    [](const auto& info) {
      return fmt::format("{}_{}ranks", backendName(info.param.backend), info.param.ranks);
    });

TEST_P(Conformance, SlotFlowControl) {
  const Kind kind = GetParam().kind;
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
        setSlot(kind, slot, i, 8);
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
      setSlot(kind, slot, k, 8);
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
        unsigned char last = 0;
        fromSlot(kind, static_cast<const char*>(data) + 7, &last, 1);
        EXPECT_EQ(last, i);
        in.release();
      }
      size_t bytes;
      EXPECT_EQ(in.tryPeek(&bytes, nullptr), nullptr);
      phase.store(3);
    }
  });
  expectOk(errors);
}

TEST_P(Conformance, DoorbellWakesSleeperAndTimesOut) {
  const Kind kind = GetParam().kind;
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

TEST_P(Conformance, DoorbellWakesASleepingReceiver) {
  const Kind kind = GetParam().kind;
  if (kind == Kind::kOfi && std::string(GetParam().tls) == "shm") {
    // Here rank 0 (a thread) closes its endpoint while rank 1 still sends it a credit: libfabric
    // 1.17's shm provider then crashes in the sender (pthread_spin_lock in the closed peer's
    // region, which endpoints of one process share). Between processes the region stays mapped.
    BRAID_SKIP_NO_DEVICE(
        "libfabric provider shm (1.17) crashes sending to a closed endpoint of the same process");
  }
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("bell");
  std::atomic<bool> asleep{false};
  double wokeAfterPost = -1;
  auto errors = runRanks(2, [&](int rank) {
    auto ep = connect(makeConfig(rank, 2, {kind, kind}, jobId), kv);
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
      fromSlot(kind, data, &sentAt, 8);
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
      toSlot(kind, slot, &now, 8);
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

TEST_P(Conformance, PeerAbortAfterSignalAbort) {
  const Kind kind = GetParam().kind;
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
      EXPECT_FALSE(ep->peerAbort().has_value());
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

// K slots in flight and no more until the receiver releases; big slots go by rendezvous.
TEST_P(Conformance, SlotFlowControlAndPipelining) {
  const Kind kind = GetParam().kind;
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("flow");
  const int k = 4;
  const size_t slotBytes = 1 << 20;
  std::atomic<int> stage{0};
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, {kind, kind}, jobId);
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
        fillSlotPayload(kind, slot, slotBytes, 100 + i);
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
      fillSlotPayload(kind, slot, 5, 200);
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
        EXPECT_EQ(checkSlotPayload(kind, data, bytes, 100 + i), -1) << "message " << i;
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
      EXPECT_EQ(checkSlotPayload(kind, data, bytes, 200), -1);
      in.release();
      stage = 3;
    }
  });
  expectOk(errors);
}

// The backend under test between "nodes" {0,1} and {2,3}, shm within: one doorbell for both.
TEST_P(Conformance, BehindOneEndpointWithShm) {
  const Kind kind = GetParam().kind;  // shm: shm within and across
  const int ranks = 4;
  MemoryKeyValue kv;
  std::string jobId = uniqueJobId("mixed");
  if (deviceSlots(kind)) {
    // One endpoint carries device or host buffers, never both: refused before any wait.
    try {
      connect(makeConfig(0, ranks, {Kind::kSelf, Kind::kShm, kind, kind}, jobId), kv);
      ADD_FAILURE() << "an endpoint mixing device and host slots was made";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find("not both"), std::string::npos) << e.what();
    }
    return;
  }
  std::barrier sync(ranks);
  auto errors = runRanks(ranks, [&](int rank) {
    std::vector<Kind> kinds(ranks);
    for (int p = 0; p < ranks; ++p) kinds[p] = p / 2 == rank / 2 ? Kind::kShm : kind;
    EndpointConfig c = makeConfig(rank, ranks, kinds, jobId);
    c.slots = 3;
    c.slotBytes = 500;
    std::unique_ptr<Endpoint> ep;
    try {
      ep = connect(c, kv);
      EXPECT_EQ(ep->peerKind(rank ^ 1), Kind::kShm);
      EXPECT_EQ(ep->peerKind((rank + 2) % ranks), kind);
      exchangeAll(*ep, 100, 500, 30);
    } catch (...) {
      sync.arrive_and_drop();
      throw;
    }
    sync.arrive_and_wait();
  });
  expectOk(errors);
}

TEST_P(Conformance, MissingPeerTimesOutNamingIt) {
  const Kind kind = GetParam().kind;
  MemoryKeyValue kv;
  EndpointConfig c = makeConfig(0, 2, {kind, kind}, uniqueJobId("lonely"));
  c.timeoutSeconds = 0.5;
  try {
    connect(c, kv);
    ADD_FAILURE() << "connect without a peer must time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer rank 1"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(shmEntries("braid-" + c.jobId + "-").empty());
}

// The network backends' connection phase (network/net.h's connect and accept, driven once by
// ChannelEndpoint::connectPeers): a peer that published its handle but is not who it claims (a
// wrong secret) never completes, and the timeout names it and what it still lacks.
class NetworkConnect : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { USE_BACKEND(GetParam()); }
};

TEST_P(NetworkConnect, ImpostorTimesOutNamingWhatThePeerLacks) {
  const Kind kind = GetParam().kind;
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("impostor");
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, {kind, kind}, jobId);
    c.timeoutSeconds = 1.5;
    if (rank == 1) c.secret = "wrong";
    connect(c, kv);
  });
  // Each rank fails naming the other; at least one by the deadline, saying what it waited for
  // (tcp: rank 1 for rank 0 "to connect" while rank 0 sees its dial closed; ucx and ofi: both
  // for "its hello").
  int timedOut = 0;
  for (int r = 0; r < 2; ++r) {
    const std::string peer = std::to_string(1 - r);
    EXPECT_NE(errors[r].find("rank " + std::to_string(r) + ": "), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("peer rank"), std::string::npos) << errors[r];
    const std::string waited = "connect timed out waiting for peer rank(s) " + peer + " (";
    if (errors[r].find(waited) != std::string::npos) {
      ++timedOut;
      const std::string lacks = kind == Kind::kTcp ? "to connect" : "its hello";
      EXPECT_NE(errors[r].find(waited + lacks + ")"), std::string::npos) << errors[r];
    }
  }
  EXPECT_GE(timedOut, 1) << errors[0] << " | " << errors[1];
  EXPECT_TRUE(shmEntries("braid-" + jobId + "-").empty());
}

INSTANTIATE_TEST_SUITE_P(Transports, NetworkConnect,
                         ::testing::Values(kTcpBackend, kUcxTcpBackend, kOfiTcpBackend,
                                           kOfiTcpTaggedBackend, kOfiUdpBackend),
                         [](const auto& info) { return backendName(info.param); });

uint64_t foldChecksum(uint64_t sum, Kind kind, const void* data, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  fromSlot(kind, data, host.data(), bytes);
  const unsigned char* in = host.data();
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, in + i, std::min<size_t>(8, bytes - i));
    sum = (sum ^ word) * 0x100000001b3ull;
  }
  return sum;
}

TEST_P(Conformance, Moves64MiBInSlotSizedPieces) {
  if (std::string why = threadsOnly(GetParam()); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  const Kind kind = GetParam().kind;
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
        fillSlotPayload(kind, slot, c.slotBytes, i);
        sum = foldChecksum(sum, kind, slot, c.slotBytes);
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
      sum = foldChecksum(sum, kind, data, bytes);
      fillPayload(expected.data(), c.slotBytes, i);
      want = foldChecksum(want, Kind::kShm, expected.data(), c.slotBytes);
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
  pid_t p0 = forkChild([&] { return rankMain(0); });
  pid_t p1 = forkChild([&] { return rankMain(1); });
  ASSERT_GT(p0, 0);
  ASSERT_GT(p1, 0);
  EXPECT_EQ(waitChild(p1, Deadline::after(60)), 0) << "receiver";
  EXPECT_EQ(waitChild(p0, Deadline::after(60)), 0) << "sender";
  EXPECT_TRUE(shmEntries("braid-" + jobId + "-").empty());
}

TEST_P(Conformance, TwoAndFourRanksMoveEveryByte) {
  if (std::string why = threadsOnly(GetParam()); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  const Kind kind = GetParam().kind;
  for (int ranks : {2, 4}) {
    const std::string jobId = uniqueJobId("procs");
    std::vector<pid_t> children;
    for (int r = 0; r < ranks; ++r) {
      children.push_back(forkChild([&, r] {
        FileKeyValue kv(dir_);
        EndpointConfig c = makeConfig(r, ranks, std::vector<Kind>(ranks, kind), jobId);
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
      EXPECT_EQ(waitChild(children[r], Deadline::after(60)), 0) << ranks << " ranks: rank " << r;
    }
  }
}

// On one host the kernel reports the death (shm; ucx, whose error mode is none there), or the
// connection's end (tcp). ucx may take up to 3 s, or report it as an abort.
TEST_P(Conformance, KilledPeerIsSeenDead) {
  if (std::string why = threadsOnly(GetParam()); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  const Kind kind = GetParam().kind;
  killedPeerIsSeenDead(dir_, kind, kind == Kind::kUcx ? 3.0 : 1.0, kind == Kind::kUcx);
}

TEST_P(Conformance, DestroyingWithAFrozenPeerIsBounded) {
  if (std::string why = threadsOnly(GetParam()); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  const Kind kind = GetParam().kind;
  if (kind == Kind::kOfi && std::string(GetParam().tls) == "shm") {
    // Seen in 2 of 30 runs (gdb): the sender's fi_tsend spins in pthread_spin_lock on a lock in
    // the frozen peer's shm region, which the peer's progress thread held when SIGSTOP came; the
    // provider gives braid no call that returns, so no deadline of braid's can end it.
    BRAID_SKIP_NO_DEVICE(
        "libfabric provider shm (1.17): a send to a peer frozen while it holds its region's "
        "spin lock spins without bound inside the provider");
  }
  const std::string jobId = uniqueJobId("frozen");
  const size_t slotBytes = 1 << 20;  // 8 x 1 MiB in flight: more than the socket buffers take
  pid_t child = forkChild([&] {
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
    waitChild(child, Deadline::after(5));
    FAIL() << e.what();
  }
  kill(child, SIGSTOP);
  for (int ch = 0; ch < c.channels; ++ch) {
    SendChannel& out = ep->send(1, ch);
    while (void* slot = out.tryAcquire()) {
      setSlot(kind, slot, 0x5a, c.slotBytes);
      out.post(c.slotBytes, MessageMeta{});
    }
  }
  auto start = Clock::now();
  ep.reset();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child, Deadline::after(5)), -SIGKILL);
  removeShmLeftOf(child);
  EXPECT_LT(seconds, 3.0) << "the destructor must not wait for a frozen peer";
}

INSTANTIATE_TEST_SUITE_P(Transports, Conformance,
                         ::testing::Values(kShmBackend, kTcpBackend, kUcxTcpBackend, kUcxSmBackend,
                                           kOfiTcpBackend, kOfiTcpTaggedBackend, kOfiShmBackend,
                                           kOfiShmTaggedBackend,
                                           kOfiUdpBackend, kOfiUdpTaggedBackend,
                                           kVerbsBackend, kVerbsTunedBackend,
                                           kVerbsModelBackend, kVerbsModelTunedBackend
#if BRAID_TEST_CUDA
                                           ,
                                           kCudaIpcBackend  // device slots; skips without a GPU
#endif
                                           ),
                         [](const auto& info) { return backendName(info.param); });

}  // namespace
}  // namespace braid::transport::testing
