// What only the ucx transport does (conformance_test.cc has what every backend does): its name and
// availability, a hello with the wrong secret, usage errors, UCX's own failure report between
// hosts (error mode peer). Skips where the build has no UCX.
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
    EXPECT_TRUE(errors[r].find("timed out waiting for peer rank(s) " + peer + " (its hello)") !=
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

// Between hosts UCX itself reports it (error mode peer, the endpoint's error callback).
TEST(UcxProcesses, KilledPeerIsReportedByUcxInPeerErrorMode) {
  SKIP_WITHOUT_UCX();
  useTls("tcp");
  setenv("BRAID_UCX_ERR_MODE", "peer", 1);
  TempDir dir;
  killedPeerIsSeenDead(dir.path, Kind::kUcx, 3.0, /*abortCounts=*/true);
  unsetenv("BRAID_UCX_ERR_MODE");
}

}  // namespace
}  // namespace braid::transport::testing
