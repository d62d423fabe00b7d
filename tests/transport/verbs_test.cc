// What only the verbs transport does: availability and its one-line reason (this machine has no
// RDMA device: the verbs backend must say so, and forcing it must fail with that reason), the
// device, port and GID choice and its settings (BRAID_VERBS_DEVICE, _GID_INDEX, _QPS, _TIMEOUT,
// _RETRY) on a device (tools/rxe-vm: the rxe.verbs test), else over the model, the published
// address's checks; over the software model of libibverbs (everywhere): error completions (a lost
// peer's IBV_WC_RETRY_EXC_ERR, a refused key's IBV_WC_REM_ACCESS_ERR, an endpoint that is gone)
// seen on both sides, and a bad immediate as the writer's protocol error. Traffic, flow control,
// peers that die: conformance_test and rdma_collectives_test.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include <barrier>

#include "common/config.h"
#include "tests/transport/fake_sysfs.h"
#include "tests/transport/test_support.h"
#if BRAID_HAVE_VERBS
#include "transport/verbs/calls.h"
#include "transport/verbs/device.h"
#include "transport/verbs/wire.h"
#endif

namespace braid::transport::testing {
namespace {

/// Restores the BRAID_VERBS_* settings a test changed.
class Verbs : public ::testing::Test {
 protected:
  void SetUp() override {
#if BRAID_HAVE_VERBS
    verbs::useVerbsModel(false);
    verbs::setModelDevices(1);
#endif
    for (const char* name :
         {"BRAID_VERBS_DEVICE", "BRAID_VERBS_GID_INDEX", "BRAID_VERBS_QPS",
          "BRAID_VERBS_CHUNK_BYTES", "BRAID_VERBS_TIMEOUT", "BRAID_VERBS_RETRY"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { SetUp(); }
  /// Where the backend is not available: over the model of libibverbs when `modelDoes` (the
  /// test needs no other process), else skips (kind: no device) with the reason.
  void needDevice(bool modelDoes = true) {
    std::string why;
    if (kindAvailable(Kind::kVerbs, &why)) return;
#if BRAID_HAVE_VERBS
    if (modelDoes) {
      verbs::useVerbsModel(true);
      if (kindAvailable(Kind::kVerbs, &why)) return;
    }
    BRAID_SKIP_NO_DEVICE(why);
#else
    BRAID_SKIP_MISSING(why);
#endif
  }
};

TEST_F(Verbs, AvailabilityComesWithAOneLineReason) {
  std::string why;
  const bool available = kindAvailable(Kind::kVerbs, &why);
  const std::string report = describeBackends();
  if (available) {
    EXPECT_NE(report.find("verbs: available, picked by default where it reaches (an active RDMA "
                          "port: "),
              std::string::npos)
        << report;
    // Between hosts it comes first (shm still wins on one host).
    EXPECT_EQ(chooseKinds(0, {"a", "a", "b"}, ""),
              (std::vector<Kind>{Kind::kSelf, Kind::kShm, Kind::kVerbs}));
    return;
  }
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  if (BRAID_HAVE_VERBS) {
    EXPECT_TRUE(why.rfind("no RDMA device", 0) == 0 || why.rfind("no active RDMA port", 0) == 0)
        << why;
  }
  EXPECT_NE(report.find("verbs: not available: " + why + "\n"), std::string::npos) << report;
  try {
    checkForcedKind("verbs");
    ADD_FAILURE() << "verbs forced without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("transport 'verbs' (BRAID_TRANSPORT / --transport) is not "
                                         "available: " +
                                         why),
              std::string::npos)
        << e.what();
  }
  // Never picked by itself where it is not available.
  for (Kind kind : chooseKinds(0, {"a", "b"}, "")) EXPECT_NE(kind, Kind::kVerbs);
}

TEST_F(Verbs, DeviceAndGidChoiceAreShown) {
  needDevice();
  if (IsSkipped()) return;
  const std::string report = describeBackends();
  EXPECT_NE(report.find("verbs: available"), std::string::npos) << report;
  EXPECT_NE(report.find("device "), std::string::npos) << report;
  EXPECT_NE(report.find("(the only active port, "), std::string::npos) << report;
  if (report.find("RoCE") != std::string::npos) {
    EXPECT_NE(report.find(", GID "), std::string::npos) << report;
  }
}

#if BRAID_HAVE_VERBS
// Several devices (the model's, placed on NUMA nodes by a fake sysfs): the one nearest the rank's
// CPUs unless BRAID_VERBS_DEVICE names one; braid-topo's line (describeBackends) says why.
TEST_F(Verbs, TheDeviceNearestTheRanksCpusIsChosenUnlessOneIsNamed) {
  verbs::useVerbsModel(true);
  verbs::setModelDevices(3);
  FakeSysfs sys;
  sys.twoNumaNodes();
  sys.rdmaDevice("model0", "pci0000:00/0000:00:02.0/0000:03:00.0", 0);
  sys.rdmaDevice("model1", "pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  sys.rdmaDevice("model2", "pci0000:80/0000:80:02.0/0000:82:00.0", 1);
  verbs::DeviceChoice onOne = verbs::chooseDevice(Placement{{3}, ""}, sys.root());
  EXPECT_TRUE(onOne.usable) << onOne.why;
  EXPECT_EQ(onOne.name, "model1");
  EXPECT_EQ(onOne.how,
            "the first of the nearest to the rank's CPUs (NUMA node 1): model0 (NUMA node 0, "
            "distance 21), model1 (NUMA node 1, distance 10), model2 (NUMA node 1, distance 10)");
  EXPECT_EQ(verbs::chooseDevice(Placement{{0}, ""}, sys.root()).name, "model0");
  setenv("BRAID_VERBS_DEVICE", "model2", 1);
  verbs::DeviceChoice named = verbs::chooseDevice(Placement{{0}, ""}, sys.root());
  EXPECT_EQ(named.name, "model2");
  EXPECT_EQ(named.how, "BRAID_VERBS_DEVICE");
  unsetenv("BRAID_VERBS_DEVICE");
  // This machine's sysfs knows no model device: all equally near, the first; shown with why.
  const std::string report = describeBackends();
  EXPECT_NE(report.find("device model0 port 1 (the first of the nearest to the rank's CPUs"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("model1 (NUMA node unknown)"), std::string::npos) << report;
  // With several devices listed, ranks connect and move every byte over the chosen one.
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("verbs-devices");
  std::barrier sync(2);
  auto errors = runRanks(2, [&](int rank) {
    auto ep = connect(makeConfig(rank, 2, {Kind::kVerbs, Kind::kVerbs}, jobId), kv);
    try {
      exchangeAll(*ep, 20, ep->send(1 - rank, 0).slotBytes(), 30);
    } catch (...) {
      sync.arrive_and_drop();
      throw;
    }
    sync.arrive_and_wait();  // nobody tears down while the other still receives
  });
  expectOk(errors);
}
#endif

TEST_F(Verbs, ANamedDeviceOrGidThatIsNotThereIsRefusedWithTheReason) {
  needDevice();
  if (IsSkipped()) return;
  setenv("BRAID_VERBS_DEVICE", "braid_no_such_device", 1);
  std::string why;
  EXPECT_FALSE(kindAvailable(Kind::kVerbs, &why));
  EXPECT_NE(why.find("BRAID_VERBS_DEVICE=braid_no_such_device: no such active device port"),
            std::string::npos)
      << why;
  unsetenv("BRAID_VERBS_DEVICE");
  setenv("BRAID_VERBS_GID_INDEX", "100000", 1);
  EXPECT_FALSE(kindAvailable(Kind::kVerbs, &why));
  EXPECT_NE(why.find("BRAID_VERBS_GID_INDEX=100000 is outside"), std::string::npos) << why;
  unsetenv("BRAID_VERBS_GID_INDEX");
  EXPECT_TRUE(kindAvailable(Kind::kVerbs, &why)) << why;
}

TEST_F(Verbs, SettingsOutOfRangeAreUsageErrorsNamingTheVariable) {
  needDevice();
  if (IsSkipped()) return;
  const std::pair<const char*, const char*> bad[] = {{"BRAID_VERBS_QPS", "0"},
                                                     {"BRAID_VERBS_QPS", "17"},
                                                     {"BRAID_VERBS_TIMEOUT", "32"},
                                                     {"BRAID_VERBS_RETRY", "8"},
                                                     {"BRAID_VERBS_CHUNK_BYTES", "8"}};
  for (const auto& [name, value] : bad) {
    setenv(name, value, 1);
    MemoryKeyValue kv;
    const std::string jobId = uniqueJobId("verbs-settings");
    try {
      connect(makeConfig(0, 2, {Kind::kVerbs, Kind::kVerbs}, jobId), kv);
      ADD_FAILURE() << name << "=" << value << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("rank 0: {}={}", name, value)),
                std::string::npos)
          << e.what();
    }
    unsetenv(name);
  }
}

// Two ranks that disagree on the queue pairs per peer: a usage error naming both, not a hang.
// Rank 1 is a forked child with its own setting (the variable is read at open; changing it in
// one process while another thread reads it would be a race). The addresses are refused before
// any queue pair is connected, so this holds over the model too.
TEST_F(Verbs, RanksWithDifferentQueuePairCountsAreRefused) {
  needDevice();
  if (IsSkipped()) return;
  TempDir tmp;
  const std::string jobId = uniqueJobId("verbs-qps");
  pid_t child = forkChild([&] {
    setenv("BRAID_VERBS_QPS", "2", 1);
    FileKeyValue kv(tmp.path);
    EndpointConfig c = makeConfig(1, 2, {Kind::kVerbs, Kind::kVerbs}, jobId);
    c.timeoutSeconds = 5;
    try {
      connect(c, kv);
    } catch (const Error& e) {
      return std::string(e.what()).find("published an address this rank cannot use") !=
                     std::string::npos
                 ? 0
                 : 2;
    }
    return 1;
  });
  ASSERT_GT(child, 0);
  setenv("BRAID_VERBS_QPS", "1", 1);
  FileKeyValue kv(tmp.path);
  EndpointConfig c = makeConfig(0, 2, {Kind::kVerbs, Kind::kVerbs}, jobId);
  c.timeoutSeconds = 5;
  try {
    connect(c, kv);
    ADD_FAILURE() << "1 and 2 queue pairs per peer accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("published an address this rank cannot use"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("BRAID_VERBS_QPS"), std::string::npos) << e.what();
  }
  EXPECT_EQ(waitChild(child, Deadline::after(10)), 0) << "rank 1 did not refuse rank 0's address";
}

// A peer in another pid namespace cannot be checked by pid: its death must show as a failed write
// (the slot's or the heartbeat's, unacknowledged: IBV_WC_RETRY_EXC_ERR, the way a vanished host
// does; or the slot's refused by rxe while the dead process's memory goes: IBV_WC_REM_ACCESS_ERR).
// Rank 1 runs as pid 1 of a new pid namespace (root only: the rxe guest), killed with its parent.
// Where BRAID_DEBUG_FILE is set (verbs-suite does), the log line must name rank, peer, operation,
// bytes and the status.
TEST_F(Verbs, APeerThatCannotBeCheckedByPidIsSeenDeadByAFailedWrite) {
  needDevice(/*modelDoes=*/false);
  if (IsSkipped()) return;
  if (geteuid() != 0)
    BRAID_SKIP_NO_DEVICE("a new pid namespace needs root (the rxe guest runs as root)");
  setenv("BRAID_VERBS_TIMEOUT", "8", 1);  // ~1 ms per try, 2 tries: the failure comes fast
  setenv("BRAID_VERBS_RETRY", "1", 1);
  TempDir tmp;
  const std::string jobId = uniqueJobId("verbs-pidns");
  pid_t child = forkChild([&] {
    if (unshare(CLONE_NEWPID) != 0) return 3;
    pid_t rank1 = fork();
    if (rank1 == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      FileKeyValue kv(tmp.path);
      auto ep = connect(makeConfig(1, 2, {Kind::kVerbs, Kind::kVerbs}, jobId), kv);
      std::this_thread::sleep_for(std::chrono::seconds(30));  // bounded: killed first
      _exit(0);
    }
    int status = 0;
    waitpid(rank1, &status, 0);
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(tmp.path);
  std::unique_ptr<Endpoint> ep;
  try {
    ep = connect(makeConfig(0, 2, {Kind::kVerbs, Kind::kVerbs}, jobId), kv);
  } catch (const std::exception& e) {
    kill(child, SIGKILL);
    waitChild(child, Deadline::after(5));
    FAIL() << e.what();
  }
  EXPECT_TRUE(ep->peerAlive(1));
  kill(child, SIGKILL);  // rank 1 (pid 1 of its namespace) dies with it
  EXPECT_EQ(waitChild(child, Deadline::after(5)), -SIGKILL);
  // A slot to it now: its write is the first to find no one (or, on a slow machine, the
  // heartbeat is); either way the queue pair fails and the peer is dead.
  void* slot = ep->send(1, 0).tryAcquire();
  ASSERT_NE(slot, nullptr);
  fillPayload(slot, 100, 1);
  ep->send(1, 0).post(100, MessageMeta{});
  const auto start = Clock::now();
  EXPECT_TRUE(waitFor(
      *ep, [&] { return !ep->peerAlive(1); }, 10))
      << "peer still alive";
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  RecordProperty("death_s", fmt::format("{:.2f}", seconds));
  ep.reset();
  if (const char* path = std::getenv("BRAID_DEBUG_FILE"); path && std::getenv("BRAID_DEBUG")) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string lost = "rank 0: verbs connection to peer rank 1 lost: ";
    const std::string status =
        " failed: transport retry counter exceeded (no acknowledgement within BRAID_VERBS_TIMEOUT "
        "x BRAID_VERBS_RETRY: the peer is gone or unreachable";
    // rxe may also answer the write with a NAK while the killed process's registrations are torn
    // down before its queue pair (seen about once in 20 runs of the guest).
    const std::string refused =
        " failed: remote access error (the peer refused the write (key or address)";
    const std::string slotWrite =
        lost + "writing a slot (RDMA_WRITE_WITH_IMM) of 164 bytes on channel 0 to peer rank 1";
    const std::string write = slotWrite + status;
    const std::string heartbeat =
        lost + "a control write (credit, abort or heartbeat) of 0 bytes to peer rank 1" + status;
    EXPECT_TRUE(text.str().find(write) != std::string::npos ||
                text.str().find(heartbeat) != std::string::npos ||
                text.str().find(slotWrite + refused) != std::string::npos)
        << "neither '" << write << "' nor the heartbeat's failure nor a refused write in " << path;
    RecordProperty("failed_write", text.str().find(write) != std::string::npos       ? "slot"
                                   : text.str().find(heartbeat) != std::string::npos ? "heartbeat"
                                                                                     : "refused");
  }
}

#if BRAID_HAVE_VERBS
TEST(VerbsWire, PublishedAddressRoundTripsAndChecksItsShape) {
  verbs::Published p;
  p.address.qps = 2;
  p.address.channels = 3;
  p.address.slots = 4;
  p.address.slotStride = 4160;
  p.address.psn = 0x123456;
  p.address.controlAddress = 0xdeadbeef000;
  p.address.controlKey = 77;
  p.qpns = {11, 12};
  p.regions = {{0x1000, 1, 0}, {0x2000, 2, 0}, {0x3000, 3, 0}};
  std::string why;
  auto back = verbs::decodePublished(verbs::encodePublished(p), p.address, &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(back->qpns, p.qpns);
  EXPECT_EQ(back->regions[2].address, 0x3000u);
  EXPECT_EQ(back->regions[2].key, 3u);
  EXPECT_EQ(back->address.controlAddress, p.address.controlAddress);
  verbs::PeerAddress other = p.address;
  other.slots = 8;
  EXPECT_FALSE(verbs::decodePublished(verbs::encodePublished(p), other, &why).has_value());
  EXPECT_NE(why.find("4 slots of 4160 bytes; this rank version 1, 2, 3, 8 of 4160"),
            std::string::npos)
      << why;
  std::string text = verbs::encodePublished(p);
  EXPECT_FALSE(verbs::decodePublished(text.substr(0, text.size() - 2), p.address, &why));
  EXPECT_FALSE(verbs::decodePublished("zz", p.address, &why));
  EXPECT_NE(why.find("is not a verbs address"), std::string::npos) << why;
}
#endif

// --- Over the model of libibverbs: error completions, on every machine -------------------------
#if BRAID_HAVE_VERBS
class VerbsModel : public ::testing::TestWithParam<ibv_wc_status> {
 protected:
  void SetUp() override {
    verbs::useVerbsModel(true);
    unsetenv("BRAID_VERBS_QPS");
    unsetenv("BRAID_VERBS_CHUNK_BYTES");
  }
  void TearDown() override {
    verbs::failNextModelWrites(0, IBV_WC_SUCCESS);
    verbs::useVerbsModel(false);
  }
};

// Rank 0's next write fails as the NIC reports it: rank 0 sees rank 1 dead at once (its queue
// pair went to error), and rank 1 sees rank 0 dead when its own next write (a credit or
// heartbeat, within about a second) finds that queue pair in error. Neither hangs, both destroy.
TEST_P(VerbsModel, AFailedWriteMarksThePeerDeadOnBothSides) {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("verbs-model-fail");
  std::barrier connected(2);
  auto errors = runRanks(2, [&](int rank) {
    auto ep = connect(makeConfig(rank, 2, {Kind::kVerbs, Kind::kVerbs}, jobId), kv);
    connected.arrive_and_wait();
    if (rank == 0) {
      verbs::failNextModelWrites(1, GetParam());
      void* slot = ep->send(1, 0).tryAcquire();
      if (slot == nullptr) throw std::runtime_error("no slot");
      fillPayload(slot, 1000, 7);
      ep->send(1, 0).post(1000, MessageMeta{});
    }
    const int peer = 1 - rank;
    if (!waitFor(
            *ep, [&] { return !ep->peerAlive(peer); }, 5)) {
      throw std::runtime_error(fmt::format("rank {}: peer {} still alive", rank, peer));
    }
    const auto before = Clock::now();
    ep.reset();
    if (std::chrono::duration<double>(Clock::now() - before).count() > 3) {
      throw std::runtime_error(fmt::format("rank {}: destroy took over 3 s", rank));
    }
  });
  expectOk(errors);
}

INSTANTIATE_TEST_SUITE_P(Statuses, VerbsModel,
                         ::testing::Values(IBV_WC_RETRY_EXC_ERR, IBV_WC_REM_ACCESS_ERR),
                         [](const auto& info) {
                           return std::string(info.param == IBV_WC_RETRY_EXC_ERR ? "RetryExceeded"
                                                                                 : "RemoteAccess");
                         });

// A write whose immediate names no channel, or a slot out of turn: a protocol error from the
// writer (peerAbort() names it and the rule broken), the writer dead for the receiver.
class VerbsModelProtocol : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override { verbs::useVerbsModel(true); }
  void TearDown() override {
    verbs::replaceNextModelImmediate(0);
    verbs::useVerbsModel(false);
  }
};

TEST_P(VerbsModelProtocol, ABadImmediateIsTheWritersProtocolError) {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("verbs-model-imm");
  std::barrier connected(2);
  std::string abort;
  auto errors = runRanks(2, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 2, {Kind::kVerbs, Kind::kVerbs}, jobId);
    c.channels = 2;
    c.slots = 4;
    auto ep = connect(c, kv);
    connected.arrive_and_wait();
    if (rank == 0) {
      verbs::replaceNextModelImmediate(GetParam());
      void* slot = ep->send(1, 0).tryAcquire();
      if (slot == nullptr) throw std::runtime_error("no slot");
      ep->send(1, 0).post(16, MessageMeta{});
    } else {
      if (!waitFor(
              *ep, [&] { return ep->peerAbort().has_value(); }, 5)) {
        throw std::runtime_error("rank 1: no protocol error seen");
      }
      abort = ep->peerAbort()->second;
      if (ep->peerAlive(0)) throw std::runtime_error("rank 1: rank 0 still alive");
    }
    connected.arrive_and_wait();
  });
  expectOk(errors);
  EXPECT_EQ(abort.rfind("protocol error from rank 0: ", 0), 0u) << abort;
  // 2 channels x 4 slots: 8 names channel 2 of 2; 3 is channel 0's slot 3, three turns early.
  EXPECT_NE(abort.find(GetParam() == 8 ? "names channel 2 of 2" : "expected seq"),
            std::string::npos)
      << abort;
}

INSTANTIATE_TEST_SUITE_P(Immediates, VerbsModelProtocol, ::testing::Values(8u, 3u),
                         [](const auto& info) {
                           return std::string(info.param == 8 ? "NoSuchChannel" : "SlotOutOfTurn");
                         });

// A peer whose endpoint is gone (its queue pairs destroyed) while this rank still writes to it:
// the write fails (no acknowledgement) and the peer is dead; a rank of this process cannot be
// checked by pid, so only the failed write says so.
TEST_F(Verbs, OverTheModelAWriteToAnEndpointThatIsGoneFails) {
  verbs::useVerbsModel(true);
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("verbs-model-gone");
  std::barrier connected(2);
  std::barrier gone(2);
  auto errors = runRanks(2, [&](int rank) {
    auto ep = connect(makeConfig(rank, 2, {Kind::kVerbs, Kind::kVerbs}, jobId), kv);
    connected.arrive_and_wait();
    if (rank == 1) {
      ep.reset();
      gone.arrive_and_wait();
      return;
    }
    gone.arrive_and_wait();
    void* slot = ep->send(1, 0).tryAcquire();
    if (slot == nullptr) throw std::runtime_error("no slot");
    ep->send(1, 0).post(8, MessageMeta{});
    if (!waitFor(
            *ep, [&] { return !ep->peerAlive(1); }, 5)) {
      throw std::runtime_error("rank 0: peer 1 still alive");
    }
  });
  verbs::useVerbsModel(false);
  expectOk(errors);
}
#endif

}  // namespace
}  // namespace braid::transport::testing
