// Kinds and config checks, and many ranks as threads (shm, tcp). What every backend must do is in
// conformance_test.cc.
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
  EXPECT_TRUE(parseKind("verbs", &kind));
  EXPECT_EQ(kind, Kind::kVerbs);
  EXPECT_FALSE(parseKind("rdma", &kind));
  EXPECT_STREQ(kindName(Kind::kVerbs), "verbs");
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

}  // namespace
}  // namespace braid::transport::testing
