// What only the verbs transport does: availability and its one-line reason (this machine has no
// RDMA device: the verbs backend must say so, and forcing it must fail with that reason), the
// device, port and GID choice and its settings (BRAID_VERBS_DEVICE, _GID_INDEX, _QPS, _TIMEOUT,
// _RETRY) where a device exists (tools/rxe-vm: the rxe.verbs test), and the published address's
// checks. Traffic, flow control, peers that die: conformance_test and rdma_collectives_test.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/config.h"
#include "tests/transport/test_support.h"
#if BRAID_HAVE_VERBS
#include "transport/verbs/wire.h"
#endif

namespace braid::transport::testing {
namespace {

/// Restores the BRAID_VERBS_* settings a test changed.
class Verbs : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"BRAID_VERBS_DEVICE", "BRAID_VERBS_GID_INDEX", "BRAID_VERBS_QPS",
                             "BRAID_VERBS_CHUNK_BYTES", "BRAID_VERBS_TIMEOUT", "BRAID_VERBS_RETRY"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { SetUp(); }
  /// Skips (kind: no device) where the backend is not available, with its reason.
  void needDevice() {
    std::string why;
    if (!kindAvailable(Kind::kVerbs, &why)) {
      if (BRAID_HAVE_VERBS) BRAID_SKIP_NO_DEVICE(why);
      BRAID_SKIP_MISSING(why);
    }
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
                                         "available: " + why),
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
  EXPECT_NE(report.find("(the first active port, "), std::string::npos) << report;
  if (report.find("RoCE") != std::string::npos) {
    EXPECT_NE(report.find(", GID "), std::string::npos) << report;
  }
}

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
TEST_F(Verbs, RanksWithDifferentQueuePairCountsAreRefused) {
  needDevice();
  if (IsSkipped()) return;
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("verbs-qps");
  setenv("BRAID_VERBS_QPS", "1", 1);
  // Rank 1 publishes with 2 queue pairs (its constructor reads the setting), rank 0 with 1.
  auto errors = runRanks(2, [&](int rank) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EndpointConfig c = makeConfig(rank, 2, {Kind::kVerbs, Kind::kVerbs}, jobId);
    c.timeoutSeconds = 5;
    if (rank == 0) {
      connect(c, kv);
    } else {
      setenv("BRAID_VERBS_QPS", "2", 1);
      connect(c, kv);
    }
  });
  unsetenv("BRAID_VERBS_QPS");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("published an address this rank cannot use"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("BRAID_VERBS_QPS"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1], "");
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

}  // namespace
}  // namespace braid::transport::testing
