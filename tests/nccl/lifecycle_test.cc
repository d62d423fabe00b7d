// Communicator life through braid's libnccl.so.2: split (NOCOLOR included), non-blocking init,
// ncclCommGetAsyncError after a peer is killed, the queries, argument errors, and the loud
// stubs.
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>

#include <string>
#include <vector>

#include "tests/nccl/nccl_ranks.h"

namespace braid {
namespace {

using nccltest::idPath;
using nccltest::initRank;
using testing::ChildIo;

// 5 ranks: rank 4 opts out; the others split by parity, ordered by descending parent rank.
TEST(NcclLifecycle, SplitByColorWithNoColor) {
  const std::string path = idPath();
  const int n = 5;
  nccltest::runRanks(n, [&](int rank, ChildIo& io) {
    ncclComm_t comm = initRank(path, rank, n);
    ncclComm_t sub = nullptr;
    const int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    NCCL_CHECK(ncclCommSplit(comm, color, -rank, &sub, nullptr));
    if (rank == 4) return sub == nullptr ? testing::kChildOk : testing::kChildCheckFailed;
    int subRank = -1, subSize = -1;
    NCCL_CHECK(ncclCommUserRank(sub, &subRank));
    NCCL_CHECK(ncclCommCount(sub, &subSize));
    // Even: parent ranks 2, 0 (keys -2, 0); odd: 3, 1.
    const int wantRank = rank >= 2 ? 0 : 1;
    io.say("sub", std::to_string(subRank) + "/" + std::to_string(subSize));
    if (subSize != 2 || subRank != wantRank) return testing::kChildCheckFailed;
    int32_t value = rank;
    NCCL_CHECK(ncclAllReduce(&value, &value, 1, ncclInt32, ncclSum, sub, nullptr));
    if (value != (rank % 2 == 0 ? 0 + 2 : 1 + 3)) return testing::kChildWrongData;
    NCCL_CHECK(ncclCommDestroy(sub));
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// blocking = 0: init returns ncclInProgress at once; ncclCommGetAsyncError says ncclInProgress
// until the communicator is made, then ncclSuccess.
TEST(NcclLifecycle, NonBlockingInit) {
  const std::string path = idPath();
  const int n = 3;
  nccltest::runRanks(n, [&](int rank, ChildIo& io) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t started =
        ncclCommInitRankConfig(&comm, n, nccltest::shareId(path, rank), rank, &config);
    if (started != ncclInProgress && started != ncclSuccess) return testing::kChildCheckFailed;
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    io.say("state", ncclGetErrorString(state));
    if (state != ncclSuccess) return testing::kChildCheckFailed;
    float v = 2.0f;
    NCCL_CHECK(ncclAllReduce(&v, &v, 1, ncclFloat32, ncclProd, comm, nullptr));
    NCCL_CHECK(ncclCommFinalize(comm));
    NCCL_CHECK(ncclCommDestroy(comm));
    return v == 8.0f ? testing::kChildOk : testing::kChildWrongData;
  });
}

// A peer killed with SIGKILL: the survivors' next collective fails (a remote error, not a hang)
// naming the dead rank, and ncclCommGetAsyncError reports it afterwards.
TEST(NcclLifecycle, AsyncErrorAfterAPeerIsKilled) {
  const std::string path = idPath();
  const int n = 3;
  testing::Job job(n, 0, {{"BRAID_TIMEOUT", "20"}});
  job.startAll([&](int rank, ChildIo& io) {
    ncclComm_t comm = initRank(path, rank, n);
    std::vector<float> buf(4096, 1.0f);
    NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr));
    io.signalReady();
    if (rank == 2) ::pause();  // killed here
    ::sleep(1);
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 50 && r == ncclSuccess; ++i)
      r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    io.say("result", std::to_string(int(r)));
    io.say("message", ncclGetLastError(comm));
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    io.say("async", std::to_string(int(async)));
    NCCL_CHECK(ncclCommAbort(comm));
    return r == ncclRemoteError && async == ncclRemoteError ? testing::kChildOk
                                                            : testing::kChildCheckFailed;
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(job.waitReady(r, 60)) << "rank " << r;
  ::kill(job.pid(2), SIGKILL);
  const auto results = job.finish(60);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exitCode, 0) << results[r].describe();
    EXPECT_NE(results[r].get("message").find("2"), std::string::npos) << results[r].describe();
  }
}

TEST(NcclLifecycle, VersionErrorsAndQueries) {
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22100);
  EXPECT_EQ(version, NCCL_VERSION(2, 21, 0));
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_NE(std::string(ncclGetErrorString(ncclRemoteError)), "");
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // no group started
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclGroupStart"), std::string::npos);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);

  std::vector<ncclComm_t> comms(2);
  ASSERT_EQ(ncclCommInitAll(comms.data(), 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  float x = 1;
  // fp8 (NCCL 2.24's ncclFloat8e4m3 = 10) and unknown types, bad roots and ops: refused, named.
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclDataType_t(10), ncclSum, comms[0], nullptr),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("not supported"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclDataType_t(42), ncclSum, comms[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(&x, &x, 1, ncclFloat32, 2, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("root 2"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclRedOp_t(9), comms[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  // Host buffers with a stream: not braid's extension.
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], cudaStream_t(0x10)),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("stream NULL"), std::string::npos);
  void* handle = nullptr;
  EXPECT_EQ(ncclCommRegister(comms[0], &x, sizeof x, &handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comms[0], handle), ncclSuccess);
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  // Memory: device memory where there is a GPU; without one a CUDA error that says so.
  void* mem = nullptr;
  const ncclResult_t alloc = ncclMemAlloc(&mem, 4096);
  if (alloc == ncclSuccess) {
    EXPECT_EQ(ncclMemFree(mem), ncclSuccess);
  } else {
    EXPECT_EQ(alloc, ncclUnhandledCudaError);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("4096 bytes"), std::string::npos);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// The calls braid does not implement: ncclInvalidUsage, and the last error says so.
extern "C" {
ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
ncclResult_t ncclCommInitRankScalable(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, void**, int);
ncclResult_t ncclGroupSimulateEnd(void*);
ncclResult_t pncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
}

TEST(NcclLifecycle, StubsAreLoud) {
  auto expectStub = [](ncclResult_t result, const char* name) {
    EXPECT_EQ(result, ncclInvalidUsage) << name;
    const std::string message = ncclGetLastError(nullptr);
    EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_NE(message.find("braid does not implement"), std::string::npos) << message;
  };
  expectStub(ncclCommShrink(nullptr, nullptr, 0, nullptr, nullptr, 0), "ncclCommShrink");
  expectStub(pncclCommShrink(nullptr, nullptr, 0, nullptr, nullptr, 0), "ncclCommShrink");
  expectStub(ncclCommInitRankScalable(nullptr, 1, 0, 0, nullptr, nullptr),
             "ncclCommInitRankScalable");
  expectStub(ncclCommWindowRegister(nullptr, nullptr, 0, nullptr, 0), "ncclCommWindowRegister");
  expectStub(ncclGroupSimulateEnd(nullptr), "ncclGroupSimulateEnd");
}

}  // namespace
}  // namespace braid
