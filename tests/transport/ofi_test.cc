// What only the ofi transport does: the provider choice (BRAID_OFI_PROVIDER, never the default
// with a software provider), an unusable provider's reason, local memory registration forced on a
// provider that does not need it, ranks on different providers refused, and a silent peer seen
// dead after BRAID_OFI_PEER_TIMEOUT. The conformance suite runs the rest over each provider.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include "common/config.h"
#include "tests/transport/test_support.h"

namespace braid::transport::testing {
namespace {

constexpr Backend kTcp = kOfiTcpBackend;

// Three ranks as threads, every pair and channel, every byte checked.
void moveEveryByte() {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("mr");
  expectOk(runRanks(3, [&](int rank) {
    EndpointConfig c = makeConfig(rank, 3, std::vector<Kind>(3, Kind::kOfi), jobId);
    c.slots = 4;
    c.slotBytes = 5000;
    auto ep = connect(c, kv);
    exchangeAll(*ep, 60, c.slotBytes, 30);
    kv.set(fmt::format("{}/done/{}", jobId, rank), "1");
    for (int p = 0; p < 3; ++p) kv.get(fmt::format("{}/done/{}", jobId, p), Deadline::after(30));
  }));
}

class Ofi : public ::testing::Test {
 protected:
  void SetUp() override { USE_BACKEND(kTcp); }
  void TearDown() override {
    unsetenv("BRAID_OFI_MR");
    unsetenv("BRAID_OFI_PEER_TIMEOUT");
    unsetenv("BRAID_OFI_RMA");
  }
};

TEST_F(Ofi, ChosenOnlyWhenForcedWithASoftwareProvider) {
  unsetenv("BRAID_OFI_PROVIDER");
  const std::string report = describeBackends();
  EXPECT_NE(report.find("ofi: "), std::string::npos) << report;
  EXPECT_NE(report.find("provider "), std::string::npos) << report;
  const bool hardware =
      report.find("ofi: available, picked by default where it reaches") != std::string::npos;
  if (!hardware) {
    EXPECT_NE(report.find("ofi: available, only when forced (provider tcp;ofi_rxm is a software "
                          "one); provider tcp;ofi_rxm: no hardware provider listed"),
              std::string::npos)
        << report;
  }
  const std::vector<std::string> hosts = {"a", "b"};
  std::vector<Kind> kinds = chooseKinds(0, hosts, "");
  EXPECT_EQ(kinds[1] == Kind::kOfi, hardware) << report;
  EXPECT_EQ(chooseKinds(0, hosts, "ofi"), (std::vector<Kind>{Kind::kSelf, Kind::kOfi}));
  EXPECT_EQ(chooseKinds(1, {"a", "a"}, "ofi"), (std::vector<Kind>{Kind::kOfi, Kind::kSelf}));
}

TEST_F(Ofi, AnUnusableProviderIsNotAvailableAndSaysWhy) {
  setenv("BRAID_OFI_PROVIDER", "no_such_provider", 1);
  std::string why;
  EXPECT_FALSE(kindAvailable(Kind::kOfi, &why));
  EXPECT_NE(why.find("no_such_provider"), std::string::npos) << why;
  EXPECT_NE(why.find("fi_getinfo"), std::string::npos) << why;
  try {
    checkForcedKind("ofi");
    ADD_FAILURE() << "an unusable provider was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("is not available"), std::string::npos) << e.what();
  }
  useSubTransport(kTcp);
  EXPECT_TRUE(kindAvailable(Kind::kOfi));
}

// BRAID_OFI_MR=local registers every buffer and passes its descriptor, as verbs or efa need;
// tcp;ofi_rxm accepts registrations, so the path runs here with every byte checked, on both data
// paths (remote writes, tagged messages).
TEST_F(Ofi, LocalRegistrationForcedMovesEveryByte) {
  for (const char* rma : {"auto", "off"}) {
    SCOPED_TRACE(fmt::format("BRAID_OFI_RMA={}", rma));
    setenv("BRAID_OFI_RMA", rma, 1);
    setenv("BRAID_OFI_MR", "local", 1);
    moveEveryByte();
  }
}

// Rank 1 (a forked child) with `childVar`=`childValue`, rank 0 here with `ownVar`=`ownValue`:
// rank 0's connect must fail with kInvalidUsage saying `expected`; the child fails too.
void expectRefused(const char* childVar, const char* childValue, const char* ownVar,
                   const char* ownValue, const std::string& expected) {
  TempDir dir;
  const std::string jobId = uniqueJobId("refused");
  pid_t child = forkChild([&] {
    setenv(childVar, childValue, 1);
    FileKeyValue kv(dir.path);
    EndpointConfig c = makeConfig(1, 2, {Kind::kOfi, Kind::kOfi}, jobId);
    c.timeoutSeconds = 3;
    try {
      connect(c, kv);
    } catch (const Error&) {
      return 0;  // refused as well (or timed out waiting for rank 0's hello)
    }
    return 1;
  });
  ASSERT_GT(child, 0);
  setenv(ownVar, ownValue, 1);
  FileKeyValue kv(dir.path);
  EndpointConfig c = makeConfig(0, 2, {Kind::kOfi, Kind::kOfi}, jobId);
  c.timeoutSeconds = 3;
  try {
    connect(c, kv);
    ADD_FAILURE() << "connected: " << expected;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  EXPECT_EQ(waitChild(child, Deadline::after(10)), 0);
}

TEST_F(Ofi, RanksOnDifferentProvidersAreRefused) {
  std::string why;
  setenv("BRAID_OFI_PROVIDER", "udp;ofi_rxd", 1);
  const bool udp = kindAvailable(Kind::kOfi, &why);
  useSubTransport(kTcp);
  if (!udp) BRAID_SKIP_NO_DEVICE(why);
  expectRefused("BRAID_OFI_PROVIDER", "udp;ofi_rxd", "BRAID_OFI_PROVIDER", "tcp;ofi_rxm",
                "peer rank 1 uses libfabric provider 'udp;ofi_rxd', this rank 'tcp;ofi_rxm'");
}

// Every rank must move data the same way: remote writes on one and tagged messages on the other
// would never meet.
TEST_F(Ofi, RanksOnDifferentDataPathsAreRefused) {
  expectRefused("BRAID_OFI_RMA", "off", "BRAID_OFI_RMA", "on",
                "peer rank 1 moves data as tagged, this rank as rma");
}

// A frozen peer (SIGSTOP: its process exists, so no pid check sees it) is seen dead by its
// silence: no heartbeat for BRAID_OFI_PEER_TIMEOUT seconds.
TEST_F(Ofi, ASilentPeerIsSeenDeadAfterThePeerTimeout) {
  setenv("BRAID_OFI_PEER_TIMEOUT", "1.5", 1);
  TempDir dir;
  const std::string jobId = uniqueJobId("silent");
  pid_t child = forkChild([&] {
    FileKeyValue kv(dir.path);
    auto ep = connect(makeConfig(1, 2, {Kind::kOfi, Kind::kOfi}, jobId), kv);
    std::this_thread::sleep_for(std::chrono::seconds(20));  // bounded: the test kills it first
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(dir.path);
  auto ep = connect(makeConfig(0, 2, {Kind::kOfi, Kind::kOfi}, jobId), kv);
  // Heartbeats keep a quiet but live peer alive past the timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(ep->peerAlive(1)) << "a live peer that sends nothing but heartbeats";
  kill(child, SIGSTOP);
  const auto stopped = Clock::now();
  EXPECT_TRUE(waitFor(*ep, [&] { return !ep->peerAlive(1); }, 6));
  const double seconds = std::chrono::duration<double>(Clock::now() - stopped).count();
  EXPECT_GE(seconds, 0.5);
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child, Deadline::after(5)), -SIGKILL);
  auto before = Clock::now();
  ep.reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - before).count(), 3.0);
}

}  // namespace
}  // namespace braid::transport::testing
