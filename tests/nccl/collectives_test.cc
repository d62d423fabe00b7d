// Every collective through braid's libnccl.so.2 on host buffers (braid's extension), across
// rank processes, against the test kit's reference: every dtype and op, counts 0, 1 and primes,
// in place and out of place (ncclAlltoAll, ncclGather and ncclScatter too); PreMulSum;
// send/recv.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cmath>
#include <vector>

#include "tests/kit/host_case.h"
#include "tests/nccl/nccl_cases.h"
#include "tests/nccl/nccl_ranks.h"

namespace braid {
namespace {

using nccltest::idPath;
using nccltest::initRank;
using testing::ChildIo;
using nccltest::callNccl;
using nccltest::casesFor;
using testing::CollectiveCase;

void runMatrix(int n, const std::vector<CollectiveCase>& cases) {
  const std::string path = idPath();
  nccltest::runRanks(n, [&](int rank, ChildIo& io) {
    ncclComm_t comm = initRank(path, rank, n);
    for (const CollectiveCase& c : cases) {
      std::string wrong = testing::runCaseWith(rank, n, c, [&](const void* send, void* recv) {
        nccltest::check(callNccl(comm, c, send, recv), c.name().c_str());
      });
      if (!wrong.empty()) {
        io.say("wrong", wrong);
        return testing::kChildWrongData;
      }
    }
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

const std::vector<DataType> kEveryType(std::begin(testing::kAllTypes), std::end(testing::kAllTypes));
const std::vector<RedOp> kEveryOp(std::begin(testing::kAllOps), std::end(testing::kAllOps));

TEST(NcclCollectives, EveryTypeAndOpOn2Ranks) { runMatrix(2, casesFor(2, kEveryType, kEveryOp)); }
TEST(NcclCollectives, EveryTypeAndOpOn3Ranks) { runMatrix(3, casesFor(3, kEveryType, kEveryOp)); }
TEST(NcclCollectives, SomeTypesOn5Ranks) {
  runMatrix(5, casesFor(5, {DataType::kFloat32, DataType::kInt8, DataType::kBFloat16},
                        {RedOp::kSum, RedOp::kMax, RedOp::kAvg}));
}
TEST(NcclCollectives, SomeTypesOn8Ranks) {
  runMatrix(8, casesFor(8, {DataType::kFloat32, DataType::kUint64}, {RedOp::kSum, RedOp::kMin}));
}

// ncclBcast is broadcast in place.
TEST(NcclCollectives, Bcast) {
  const std::string path = idPath();
  nccltest::runRanks(3, [&](int rank, ChildIo&) {
    ncclComm_t comm = initRank(path, rank, 3);
    std::vector<int64_t> buf(101, rank == 1 ? 7 : -1);
    NCCL_CHECK(ncclBcast(buf.data(), buf.size(), ncclInt64, 1, comm, nullptr));
    for (int64_t v : buf)
      if (v != 7) return testing::kChildWrongData;
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// PreMulSum: rank r scales by (r + 1), read at creation (HostImmediate) or when the collective
// runs (a host pointer with ncclScalarDevice residence); in place and out of place.
TEST(NcclCollectives, PreMulSum) {
  const std::string path = idPath();
  const int n = 3;
  nccltest::runRanks(n, [&](int rank, ChildIo& io) {
    ncclComm_t comm = initRank(path, rank, n);
    float scalar = float(rank + 1);
    ncclRedOp_t immediate, atRun;
    NCCL_CHECK(ncclRedOpCreatePreMulSum(&immediate, &scalar, ncclFloat32, ncclScalarHostImmediate,
                                        comm));
    double runScalar = 0;  // set after creation: must be read when the collective runs
    NCCL_CHECK(ncclRedOpCreatePreMulSum(&atRun, &runScalar, ncclFloat64, ncclScalarDevice, comm));
    runScalar = rank + 1;
    const size_t count = 257;
    std::vector<float> in(count), out(count);
    std::vector<double> inD(count);
    for (size_t i = 0; i < count; ++i) in[i] = float(i % 5), inD[i] = double(i % 7);
    NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, immediate, comm, nullptr));
    NCCL_CHECK(ncclAllReduce(inD.data(), inD.data(), count, ncclFloat64, atRun, comm, nullptr));
    const double weights = n * (n + 1) / 2.0;  // sum of (r + 1)
    for (size_t i = 0; i < count; ++i) {
      if (out[i] != float((i % 5) * weights) || inD[i] != (i % 7) * weights) {
        io.say("wrong", "element " + std::to_string(i));
        return testing::kChildWrongData;
      }
    }
    // Reduce-scatter with the same op: each block scaled and summed.
    std::vector<float> rsIn(count * n, 1.0f), rsOut(count);
    NCCL_CHECK(ncclReduceScatter(rsIn.data(), rsOut.data(), count, ncclFloat32, immediate, comm,
                                 nullptr));
    for (float v : rsOut)
      if (v != float(weights)) return testing::kChildWrongData;
    // The op is for float32 only; destroyed, it is unknown.
    if (ncclAllReduce(inD.data(), inD.data(), count, ncclFloat64, immediate, comm, nullptr) !=
        ncclInvalidArgument)
      return testing::kChildCheckFailed;
    NCCL_CHECK(ncclRedOpDestroy(immediate, comm));
    NCCL_CHECK(ncclRedOpDestroy(atRun, comm));
    if (ncclAllReduce(in.data(), out.data(), count, ncclFloat32, immediate, comm, nullptr) !=
        ncclInvalidArgument)
      return testing::kChildCheckFailed;
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// Blocking send/recv outside a group (even to odd ranks, then back), counts 0 and large.
TEST(NcclCollectives, SendRecvPairs) {
  const std::string path = idPath();
  nccltest::runRanks(4, [&](int rank, ChildIo&) {
    ncclComm_t comm = initRank(path, rank, 4);
    const int peer = rank ^ 1;
    for (size_t count : {size_t(0), size_t(1), size_t(1) << 20}) {
      std::vector<int32_t> buf(count + 1, rank);
      if (rank % 2 == 0) {
        NCCL_CHECK(ncclSend(buf.data(), count, ncclInt32, peer, comm, nullptr));
        NCCL_CHECK(ncclRecv(buf.data(), count, ncclInt32, peer, comm, nullptr));
      } else {
        NCCL_CHECK(ncclRecv(buf.data(), count, ncclInt32, peer, comm, nullptr));
        NCCL_CHECK(ncclSend(buf.data(), count, ncclInt32, peer, comm, nullptr));
      }
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != (rank % 2 == 0 ? rank : peer)) return testing::kChildWrongData;
    }
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

}  // namespace
}  // namespace braid
