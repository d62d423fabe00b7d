// Every collective x dtype x op x algorithm x in/out-of-place x odd counts, ranks as threads over
// shared memory, checked element by element against a closed-form reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/kit/host_case.h"

namespace braid::testing {
namespace {

constexpr const auto& kTypes = kAllTypes;
constexpr const auto& kOps = kAllOps;
constexpr const auto& kColls = kScheduledCollectives;

bool algorithmRuns(Algorithm algo, Collective coll) {
  bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
  if (algo == Algorithm::kChain) return rooted;
  if (algo == Algorithm::kRing) return !rooted;
  return true;
}

using Case = CollectiveCase;

// Runs every case on n ranks with the same options.
void runAndCheck(int n, const Options& options, const std::vector<Case>& cases) {
  runCasesOnThreads(
      n, [&](int) { return options; }, cases);
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
