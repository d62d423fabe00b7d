// Group semantics through braid's libnccl.so.2 on host buffers: nesting, a ring of send/recv
// pairs in one group (never a deadlock), init inside a group (one thread making several ranks),
// ncclCommInitAll driven by one thread, and abort inside a group.
#include <gtest/gtest.h>
#include <nccl.h>

#include <vector>

#include "tests/nccl/nccl_ranks.h"

namespace braid {
namespace {

using nccltest::idPath;
using nccltest::initRank;
using testing::ChildIo;

// Every rank sends 4 MiB to the next and receives from the previous, all posted in one group
// (NCCL's ring exchange; blocking sends in this order would wait on each other), inside a
// nested group whose inner end starts nothing.
TEST(NcclGroup, NestedRingOfSendRecv) {
  const std::string path = idPath();
  const int n = 4;
  nccltest::runRanks(n, [&](int rank, ChildIo& io) {
    ncclComm_t comm = initRank(path, rank, n);
    const size_t count = size_t(1) << 20;
    std::vector<float> out(count, float(rank)), in(count, -1.0f);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(out.data(), count, ncclFloat32, next, comm, nullptr));
    NCCL_CHECK(ncclRecv(in.data(), count, ncclFloat32, prev, comm, nullptr));
    NCCL_CHECK(ncclGroupEnd());
    if (in[0] != -1.0f) {  // the inner end must not have run the group
      io.say("wrong", "the inner ncclGroupEnd ran the group");
      return testing::kChildCheckFailed;
    }
    NCCL_CHECK(ncclGroupEnd());
    for (float v : in)
      if (v != float(prev)) return testing::kChildWrongData;
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// All-to-all as PyTorch posts it on NCCL: every rank sends a block to every rank, itself
// included, and receives one from each, all in one group; the self pair is one copy. A send to
// itself outside a group, or without its receive, is ncclInvalidUsage naming what is missing.
TEST(NcclGroup, AllToAllWithSelfPairs) {
  const std::string path = idPath();
  const int n = 3;
  nccltest::runRanks(n, [&](int rank, ChildIo& io) {
    ncclComm_t comm = initRank(path, rank, n);
    const size_t block = 1001;  // odd: no alignment to lean on
    std::vector<int32_t> out(block * n), in(block * n, -1);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < block; ++i) out[q * block + i] = int32_t(rank * 1000000 + q * 10000 + i);
    NCCL_CHECK(ncclGroupStart());
    for (int q = 0; q < n; ++q) {
      NCCL_CHECK(ncclSend(out.data() + q * block, block, ncclInt32, q, comm, nullptr));
      NCCL_CHECK(ncclRecv(in.data() + q * block, block, ncclInt32, q, comm, nullptr));
    }
    NCCL_CHECK(ncclGroupEnd());
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < block; ++i)
        if (in[q * block + i] != int32_t(q * 1000000 + rank * 10000 + i)) {
          io.say("wrong", "from rank " + std::to_string(q) + " element " + std::to_string(i));
          return testing::kChildWrongData;
        }
    // Outside a group: refused, saying why.
    if (ncclSend(out.data(), 1, ncclInt32, rank, comm, nullptr) != ncclInvalidUsage ||
        std::string(ncclGetLastError(comm)).find("only inside ncclGroupStart") ==
            std::string::npos) {
      io.say("wrong", std::string("self send outside a group: ") + ncclGetLastError(comm));
      return testing::kChildCheckFailed;
    }
    // A send to itself without its receive.
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(out.data(), 1, ncclInt32, rank, comm, nullptr));
    if (ncclGroupEnd() != ncclInvalidUsage ||
        std::string(ncclGetLastError(comm)).find("1 ncclSend(s) to this rank itself but 0") ==
            std::string::npos) {
      io.say("wrong", std::string("unmatched self send: ") + ncclGetLastError(comm));
      return testing::kChildCheckFailed;
    }
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// Collectives and send/recv mixed in one group, run in issue order.
TEST(NcclGroup, CollectivesAndPointToPointInOneGroup) {
  const std::string path = idPath();
  const int n = 3;
  nccltest::runRanks(n, [&](int rank, ChildIo&) {
    ncclComm_t comm = initRank(path, rank, n);
    std::vector<int32_t> a(1000, rank + 1), b(1000 * n, 0), peerBuf(10, rank), got(10, -1);
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllReduce(a.data(), a.data(), a.size(), ncclInt32, ncclSum, comm, nullptr));
    NCCL_CHECK(ncclAllGather(peerBuf.data(), b.data(), 10, ncclInt32, comm, nullptr));
    NCCL_CHECK(ncclSend(peerBuf.data(), 10, ncclInt32, (rank + 1) % n, comm, nullptr));
    NCCL_CHECK(ncclRecv(got.data(), 10, ncclInt32, (rank + n - 1) % n, comm, nullptr));
    NCCL_CHECK(ncclGroupEnd());
    for (int32_t v : a)
      if (v != n * (n + 1) / 2) return testing::kChildWrongData;
    for (int q = 0; q < n; ++q)
      if (b[size_t(q) * 10] != q) return testing::kChildWrongData;
    if (got[0] != (rank + n - 1) % n) return testing::kChildWrongData;
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// One thread makes 3 ranks of one communicator inside a group (created at ncclGroupEnd, on
// threads of their own), then all-reduces on all three in another group.
TEST(NcclGroup, InitInsideAGroupFromOneThread) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  const int n = 3;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<double>> bufs(n, std::vector<double>(333));
  for (int r = 0; r < n; ++r) std::fill(bufs[r].begin(), bufs[r].end(), r * 1.5);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 333, ncclFloat64, ncclMax, comms[r],
                            nullptr),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(bufs[r][0], 3.0);
    EXPECT_EQ(bufs[r][332], 3.0);
    int rank = -1;
    EXPECT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// ncclCommInitAll: 4 ranks in this process; one thread drives all through a group.
TEST(NcclGroup, InitAllDrivenByOneThread) {
  const int n = 4;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<int64_t>> send(n, std::vector<int64_t>(17)), recv(n, std::vector<int64_t>(17 * n));
  for (int r = 0; r < n; ++r) std::fill(send[r].begin(), send[r].end(), r);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllGather(send[r].data(), recv[r].data(), 17, ncclInt64, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) EXPECT_EQ(recv[r][size_t(q) * 17 + 16], q);
    int device = -2;
    EXPECT_EQ(ncclCommCuDevice(comms[r], &device), ncclSuccess);
    EXPECT_EQ(device, r);  // devlist NULL: rank i on device i
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// Abort inside a group (as PyTorch does with NCCL >= 2.22): at once; the group's queued ops of
// that communicator are dropped, the group's end neither hangs nor fails for them, and the
// peers' next collective fails naming the aborted rank.
TEST(NcclGroup, AbortInsideAGroup) {
  const std::string path = idPath();
  const int n = 3;
  nccltest::runRanks(
      n,
      [&](int rank, ChildIo& io) {
        ncclComm_t comm = initRank(path, rank, n);
        std::vector<float> buf(64, 1.0f);
        NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
        if (rank == 0) {
          NCCL_CHECK(ncclGroupStart());
          NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
          NCCL_CHECK(ncclCommAbort(comm));
          NCCL_CHECK(ncclGroupEnd());
          return testing::kChildOk;
        }
        const ncclResult_t r =
            ncclAllReduce(buf.data(), buf.data(), 64, ncclFloat32, ncclSum, comm, nullptr);
        io.say("result", ncclGetErrorString(r));
        io.say("message", ncclGetLastError(comm));
        ncclResult_t async = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
        NCCL_CHECK(ncclCommAbort(comm));
        return r != ncclSuccess && async == r ? testing::kChildOk : testing::kChildCheckFailed;
      },
      120, {{"BRAID_TIMEOUT", "20"}});
}

}  // namespace
}  // namespace braid
