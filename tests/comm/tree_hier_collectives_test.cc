// Double binary tree and hierarchical all-reduce end to end: ranks as threads over the real
// transports (fake nodes via Options::hostName talk tcp on loopback, ranks of one node shm), every
// dtype x op x placement x count, each element checked against the closed-form reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/kit/host_case.h"

namespace braid::testing {
namespace {

constexpr const auto& kTypes = kAllTypes;
constexpr const auto& kOps = kAllOps;
constexpr size_t kCounts[] = {0, 1, 2, 7, 1023};

struct Case {
  DataType type;
  RedOp op;
  size_t count;
  bool inPlace;
};

std::vector<Case> fullMatrix() {
  std::vector<Case> cases;
  for (DataType type : kTypes)
    for (RedOp op : kOps)
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) cases.push_back({type, op, count, inPlace});
  return cases;
}

// Runs the all-reduce cases on every rank (same order everywhere); rank r uses optionsOf(r).
void runAndCheck(int n, const std::function<Options(int)>& optionsOf,
                 const std::vector<Case>& cases) {
  std::vector<CollectiveCase> all;
  for (const Case& c : cases) {
    all.push_back({Collective::kAllReduce, c.type, c.op, c.count, c.inPlace, -1});
  }
  runCasesOnThreads(n, optionsOf, all);
}

// Options posing rank r as a rank of node nodeOf[r].
std::function<Options(int)> onNodes(const Options& base, const std::vector<int>& nodeOf) {
  return [base, nodeOf](int r) {
    Options o = base;
    o.hostName = fmt::format("fake-node-{}", nodeOf[r]);
    return o;
  };
}

std::vector<int> blocks(const std::vector<int>& sizes) {
  std::vector<int> nodeOf;
  for (size_t k = 0; k < sizes.size(); ++k) nodeOf.insert(nodeOf.end(), sizes[k], int(k));
  return nodeOf;
}

Options smallSlots(Algorithm algo) {
  Options options;
  options.algorithm = algo;
  options.timeoutSeconds = 30;
  options.chunkBytes = 256;  // odd counts cross piece boundaries, several rounds per lane
  return options;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      unsetenv(name_);
    } else {
      setenv(name_, old_.c_str(), 1);
    }
  }

 private:
  const char* name_;
  std::string old_;
};

class TreeAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(TreeAllReduce, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int n = GetParam();
  const Options options = smallSlots(Algorithm::kTree);
  runAndCheck(
      n, [&](int) { return options; }, fullMatrix());
}

INSTANTIATE_TEST_SUITE_P(Threads, TreeAllReduce, ::testing::Range(1, 17),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return fmt::format("{}ranks", info.param);
                         });

struct NodeLayout {
  const char* name;
  std::vector<int> nodeOf;
  int rotation = 0;  // which (count, placement) each dtype x op gets
};

// One node: all shm, fast: the whole matrix.
TEST(HierAllReduce, OneNodeOf16EveryTypeOpCountAndPlacement) {
  runAndCheck(16, onNodes(smallSlots(Algorithm::kHier), blocks({16})), fullMatrix());
}

// Several fake nodes talk tcp on loopback, whose latency on a loaded 2-core machine is
// milliseconds per message: each shape runs every dtype x op once (count and placement rotating,
// a different rotation per shape, so the six shapes cover 6 of the 8 count x placement choices of
// every dtype x op) plus every count and placement for float sum and bfloat16 avg.
std::vector<Case> rotatedMatrix(int offset) {
  std::vector<Case> cases;
  const size_t counts[] = {1, 2, 7, 1023};
  int i = offset;
  for (DataType type : kTypes) {
    for (RedOp op : kOps) {
      cases.push_back({type, op, counts[i % 4], (i / 4) % 2 == 1});
      ++i;
    }
  }
  for (size_t count : kCounts) {
    for (bool inPlace : {false, true}) {
      cases.push_back({DataType::kFloat32, RedOp::kSum, count, inPlace});
      cases.push_back({DataType::kBFloat16, RedOp::kAvg, count, inPlace});
    }
  }
  return cases;
}

class HierAllReduce : public ::testing::TestWithParam<NodeLayout> {};

TEST_P(HierAllReduce, EveryTypeAndOpMatchesTheReference) {
  const NodeLayout& shape = GetParam();
  const int n = static_cast<int>(shape.nodeOf.size());
  runAndCheck(n, onNodes(smallSlots(Algorithm::kHier), shape.nodeOf),
              rotatedMatrix(shape.rotation));
}

INSTANTIATE_TEST_SUITE_P(FakeNodes, HierAllReduce,
                         ::testing::Values(NodeLayout{"2x4", blocks({4, 4}), 0},
                                           NodeLayout{"3x3", blocks({3, 3, 3}), 1},
                                           NodeLayout{"4x1", blocks({1, 1, 1, 1}), 2},
                                           NodeLayout{"2plus3", blocks({2, 3}), 3},
                                           NodeLayout{"1plus1plus3", blocks({1, 1, 3}), 5},
                                           NodeLayout{"interleaved2x3", {0, 1, 0, 1, 0, 1}, 6}),
                         [](const ::testing::TestParamInfo<NodeLayout>& info) {
                           return std::string(info.param.name);
                         });

// The communicator groups ranks by host key (Options::hostName here) in order of first rank.
TEST(NodeLayout, RecordedFromHostNames) {
  const std::vector<int> hostOf = {5, 2, 5, 9, 2};
  std::mutex mutex;
  std::vector<std::vector<int>> seen(hostOf.size());
  Options base;
  base.timeoutSeconds = 30;
  auto errors = runRanksEach(5, onNodes(base, hostOf), [&](Communicator& comm) {
    std::lock_guard<std::mutex> lock(mutex);
    seen[comm.rank()] = comm.nodeOf();
  });
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
    EXPECT_EQ(seen[r], (std::vector<int>{0, 1, 0, 2, 1})) << "rank " << r;
  }
  // Without host names every rank of this process is on one node.
  auto one = runRanks(3, base, [&](Communicator& comm) {
    EXPECT_EQ(comm.nodeOf(), (std::vector<int>{0, 0, 0}));
  });
  for (auto& e : one) EXPECT_EQ(errorText(e), "");
}

// BRAID_ALGO=tree|hier reaches the schedules.
TEST(TreeHierSelection, BraidAlgoPicksTreeAndHier) {
  for (auto [name, algo] : {std::pair{"tree", Algorithm::kTree}, {"hier", Algorithm::kHier}}) {
    ScopedEnv env("BRAID_ALGO", name);
    Options options;
    options.timeoutSeconds = 30;
    auto errors = runRanks(3, options, [&](Communicator& comm) {
      EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllReduce, 4096), algo);
      EXPECT_THROW(comm.chosenAlgorithm(Collective::kBroadcast, 4096), Error);
      std::vector<float> x(1000, float(comm.rank() + 1));
      comm.allReduce(x.data(), x.data(), x.size(), DataType::kFloat32, RedOp::kSum);
      for (float v : x) ASSERT_EQ(v, 6.0f);
    });
    for (auto& e : errors) EXPECT_EQ(errorText(e), "") << name;
  }
}

// Two slots per channel and 64-byte pieces: thousands of pieces per lane, so any schedule that
// lets a rank run more than its slots ahead deadlocks (and times out) here.
std::vector<Case> tinySlotCases(size_t count, bool withInt64) {
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    cases.push_back({DataType::kFloat32, RedOp::kSum, count, inPlace});
    cases.push_back({DataType::kBFloat16, RedOp::kAvg, count, inPlace});
    if (withInt64) cases.push_back({DataType::kInt64, RedOp::kMax, count, inPlace});
  }
  return cases;
}

TEST(TinySlots, TreeWithTwoSlotsAndManyPieces) {
  ScopedEnv env("BRAID_SLOTS", "2");
  for (int n : {3, 8}) {
    for (int channels : {1, 4}) {
      SCOPED_TRACE(fmt::format("{} ranks, {} channels", n, channels));
      Options options = smallSlots(Algorithm::kTree);
      options.chunkBytes = 64;
      options.channels = channels;
      runAndCheck(
          n, [&](int) { return options; }, tinySlotCases(5003, true));
    }
  }
}

TEST(TinySlots, HierWithTwoSlotsAndManyPieces) {
  ScopedEnv env("BRAID_SLOTS", "2");
  for (const auto& nodeOf : {blocks({2, 3})}) {
    for (int channels : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} ranks, {} channels", nodeOf.size(), channels));
      Options options = smallSlots(Algorithm::kHier);
      options.chunkBytes = 64;
      options.channels = channels;
      runAndCheck(static_cast<int>(nodeOf.size()), onNodes(options, nodeOf),
                  tinySlotCases(1003, false));
    }
  }
}

// One large odd count with the default slot size (128 KiB pieces, streaming stores).
TEST(LargeCounts, TreeAndHierAtOneMillionPlusThree) {
  const size_t big = (size_t(1) << 20) + 3;
  std::vector<Case> cases = {{DataType::kFloat32, RedOp::kSum, big, false},
                             {DataType::kBFloat16, RedOp::kAvg, big, true}};
  Options tree;
  tree.algorithm = Algorithm::kTree;
  tree.timeoutSeconds = 60;
  runAndCheck(
      4, [&](int) { return tree; }, cases);
  Options hier = tree;
  hier.algorithm = Algorithm::kHier;
  runAndCheck(5, onNodes(hier, blocks({2, 3})), cases);
}

}  // namespace
}  // namespace braid::testing
