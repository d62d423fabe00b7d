// Every collective x dtype x op x algorithm x in/out-of-place x odd counts, ranks as threads over
// shared memory, checked element by element against a closed-form reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include "tests/comm/harness.h"
#include "tests/comm/reference.h"

namespace braid::testing {
namespace {

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                               DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                               DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                               DataType::kBFloat16};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
constexpr Collective kColls[] = {Collective::kAllReduce, Collective::kReduceScatter,
                                 Collective::kAllGather, Collective::kBroadcast,
                                 Collective::kReduce};

bool algorithmRuns(Algorithm algo, Collective coll) {
  bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
  if (algo == Algorithm::kChain) return rooted;
  if (algo == Algorithm::kRing) return !rooted;
  return true;
}

struct Case {
  Collective coll;
  DataType type;
  RedOp op;
  size_t count;  // per the API: recvCount for reduceScatter, sendCount for allGather
  bool inPlace;
  int root;
  std::string name() const {
    return fmt::format("{} {} {} count={} {} root={}", collectiveName(coll), dataTypeName(type),
                       reduces(coll) ? redOpName(op) : "-", count,
                       inPlace ? "in-place" : "out-of-place", root);
  }
};

// Runs one case on one rank and returns "" or what was wrong.
std::string runCase(Communicator& comm, const Case& c) {
  const int n = comm.size(), r = comm.rank();
  const size_t elem = dataTypeSize(c.type);
  size_t inCount = c.count, outCount = c.count;
  if (c.coll == Collective::kReduceScatter) inCount = c.count * n;
  if (c.coll == Collective::kAllGather) outCount = c.count * n;
  std::vector<char> in(inCount * elem + 1), out(outCount * elem + 1), want(outCount * elem + 1);
  const RedOp dataOp = reduces(c.coll) ? c.op : RedOp::kSum;
  fillInput(c.type, dataOp, r, in.data(), inCount, c.coll == Collective::kAllGather ? 0 : 0);
  std::memset(out.data(), 0xA5, out.size());
  // Expected output.
  switch (c.coll) {
    case Collective::kAllReduce:
    case Collective::kReduce:
      for (size_t i = 0; i < outCount; ++i) storeExpected(c.type, c.op, n, i, want.data(), i);
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < outCount; ++i)
        storeExpected(c.type, c.op, n, r * c.count + i, want.data(), i);
      break;
    case Collective::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < c.count; ++i)
          store(c.type, want.data(), q * c.count + i, inputValue(c.type, dataOp, q, i));
      break;
    case Collective::kBroadcast:
      for (size_t i = 0; i < outCount; ++i)
        store(c.type, want.data(), i, inputValue(c.type, dataOp, c.root, i));
      break;
    default:
      break;
  }
  // In place: the data starts where the result goes.
  void* send = in.data();
  void* recv = out.data();
  if (c.inPlace) {
    switch (c.coll) {
      case Collective::kReduceScatter:
        std::memcpy(in.data(), in.data(), 0);
        recv = in.data() + r * c.count * elem;
        break;
      case Collective::kAllGather:
        std::memcpy(out.data() + r * c.count * elem, in.data(), c.count * elem);
        send = out.data() + r * c.count * elem;
        break;
      default:
        recv = in.data();
        break;
    }
  }
  switch (c.coll) {
    case Collective::kAllReduce:
      comm.allReduce(send, recv, c.count, c.type, c.op);
      break;
    case Collective::kReduceScatter:
      comm.reduceScatter(send, recv, c.count, c.type, c.op);
      break;
    case Collective::kAllGather:
      comm.allGather(send, recv, c.count, c.type);
      break;
    case Collective::kBroadcast:
      comm.broadcast(send, recv, c.count, c.type, c.root);
      break;
    case Collective::kReduce:
      comm.reduce(send, recv, c.count, c.type, c.op, c.root);
      break;
    default:
      break;
  }
  if (c.coll == Collective::kReduce && r != c.root) return "";
  long bad = firstMismatch(recv, want.data(), outCount, elem);
  if (bad < 0) return "";
  return fmt::format("rank {}: {}: element {} wrong", r, c.name(), bad);
}

// Runs every case on n ranks (same order everywhere) and reports each wrong result and error.
void runAndCheck(int n, const Options& options, const std::vector<Case>& cases) {
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto errors = runRanks(n, options, [&](Communicator& comm) {
    for (const Case& c : cases) {
      std::string problem = runCase(comm, c);
      if (!problem.empty()) {
        std::lock_guard<std::mutex> lock(mutex);
        wrong.push_back(problem);
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
  for (size_t i = 0; i < wrong.size() && i < 10; ++i) ADD_FAILURE() << wrong[i];
  EXPECT_EQ(wrong.size(), 0u);
}

struct Param {
  int ranks;
  Algorithm algo;
};

class Collectives : public ::testing::TestWithParam<Param> {};

TEST_P(Collectives, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const auto [n, algo] = GetParam();
  Options options;
  options.algorithm = algo;
  options.timeoutSeconds = 30;
  // Small slots so odd counts cross piece boundaries and rings run several rounds.
  options.chunkBytes = 1024;
  std::vector<size_t> counts = {0, 1, 2, 7, 1023};
  std::vector<Case> cases;
  for (Collective coll : kColls) {
    if (!algorithmRuns(algo, coll)) continue;
    for (DataType type : kTypes) {
      for (RedOp op : kOps) {
        if (!reduces(coll) && op != RedOp::kSum) continue;
        for (size_t count : counts) {
          // oneshot moves at most slots x chunk bytes per peer.
          if (algo == Algorithm::kOneShot && count * dataTypeSize(type) > 8 * 1024) continue;
          for (bool inPlace : {false, true}) {
            int root = (coll == Collective::kBroadcast || coll == Collective::kReduce)
                           ? int(count % n)
                           : -1;
            cases.push_back({coll, type, op, count, inPlace, root});
          }
        }
      }
    }
  }
  runAndCheck(n, options, cases);
}

// One large odd count per collective and dtype, default slot size (oneshot is for small buffers
// only, so it is not in this suite's parameters).
class LargeCollectives : public ::testing::TestWithParam<Param> {};

TEST_P(LargeCollectives, LargeOddCountMatchesTheReference) {
  const auto [n, algo] = GetParam();
  Options options;
  options.algorithm = algo;
  options.timeoutSeconds = 60;
  const size_t big = (size_t(1) << 20) + 3;
  std::vector<Case> cases;
  for (Collective coll : kColls) {
    if (!algorithmRuns(algo, coll)) continue;
    for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
      RedOp op = type == DataType::kInt64 ? RedOp::kMax : RedOp::kSum;
      if (type == DataType::kBFloat16) op = RedOp::kAvg;
      size_t count = (coll == Collective::kReduceScatter || coll == Collective::kAllGather)
                         ? big / n + 1
                         : big;
      for (bool inPlace : {false, true}) cases.push_back({coll, type, op, count, inPlace, n - 1});
    }
  }
  runAndCheck(n, options, cases);
}

std::vector<Param> params(bool withOneShot) {
  std::vector<Param> out;
  for (int n : {1, 2, 3, 4, 5, 8, 11, 16}) {
    for (Algorithm a :
         {Algorithm::kAuto, Algorithm::kRing, Algorithm::kOneShot, Algorithm::kChain}) {
      if (a != Algorithm::kOneShot || withOneShot) out.push_back({n, a});
    }
  }
  return out;
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return fmt::format("{}ranks_{}", info.param.ranks, algorithmName(info.param.algo));
}

INSTANTIATE_TEST_SUITE_P(Threads, Collectives, ::testing::ValuesIn(params(true)), paramName);
INSTANTIATE_TEST_SUITE_P(Threads, LargeCollectives, ::testing::ValuesIn(params(false)), paramName);

}  // namespace
}  // namespace braid::testing

namespace braid::testing {
namespace {

// Several lanes (BRAID_CHANNELS): rings and chains split the buffer across channels, odd lanes
// running backwards; every collective, odd counts, both placements.
TEST(MultiLane, RingsAndChainsOverSeveralChannelsMatchTheReference) {
  for (int n : {2, 3, 5}) {
    for (int channels : {2, 3}) {
      Options options;
      options.channels = channels;
      options.chunkBytes = 1024;
      options.timeoutSeconds = 30;
      std::vector<Case> cases;
      for (Collective coll : kColls) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1023}, size_t{100003}}) {
          for (bool inPlace : {false, true}) {
            int root = (coll == Collective::kBroadcast || coll == Collective::kReduce) ? n - 1 : -1;
            cases.push_back({coll, DataType::kFloat32, RedOp::kSum, count, inPlace, root});
            cases.push_back({coll, DataType::kBFloat16, RedOp::kAvg, count, inPlace, root});
          }
        }
      }
      SCOPED_TRACE(fmt::format("{} ranks, {} channels", n, channels));
      runAndCheck(n, options, cases);
    }
  }
}

}  // namespace
}  // namespace braid::testing

namespace braid::testing {
namespace {

// The largest count of the matrix, 1M+3 elements, for every dtype x op x collective x placement,
// on 3 ranks with the tuner's choice (ring for the all-to-all collectives, chain for rooted ones).
TEST(FullMatrix, EveryTypeAndOpAtOneMillionPlusThree) {
  const int n = 3;
  Options options;
  options.timeoutSeconds = 60;
  const size_t big = (size_t(1) << 20) + 3;
  std::vector<Case> cases;
  for (Collective coll : kColls) {
    for (DataType type : kTypes) {
      for (RedOp op : kOps) {
        if (!reduces(coll) && op != RedOp::kSum) continue;
        size_t count = (coll == Collective::kReduceScatter || coll == Collective::kAllGather)
                           ? big / n + 1
                           : big;
        for (bool inPlace : {false, true}) cases.push_back({coll, type, op, count, inPlace, 1});
      }
    }
  }
  runAndCheck(n, options, cases);
}

}  // namespace
}  // namespace braid::testing
