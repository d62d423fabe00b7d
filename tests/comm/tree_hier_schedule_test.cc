// Proves the double binary tree and hierarchical all-reduce schedules with the verifier, for every
// rank count 1..16 and many node shapes, and shows the verifier catches broken ones.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/schedule/generators.h"
#include "comm/schedule/schedule.h"
#include "comm/schedule/verifier.h"
#include "common/error.h"

namespace braid::comm {
namespace {

constexpr size_t kCounts[] = {0, 1, 2, 7, 1023};

ScheduleSpec treeSpec(int n, size_t count, int lanes, bool inPlace, size_t perPiece) {
  ScheduleSpec spec;
  spec.shape = Collective::kAllReduce;
  spec.family = Algorithm::kTree;
  spec.nranks = n;
  spec.count = count;
  spec.lanes = lanes;
  spec.inPlace = inPlace;
  spec.elemsPerPiece = perPiece;
  return spec;
}

ScheduleSpec hierSpec(const std::vector<int>& nodeOf, size_t count, int lanes, bool inPlace,
                      size_t perPiece) {
  ScheduleSpec spec = treeSpec(static_cast<int>(nodeOf.size()), count, lanes, inPlace, perPiece);
  spec.family = Algorithm::kHier;
  spec.nodeOf = nodeOf;
  return spec;
}

// Node ids for nodes of the given sizes, ranks of a node consecutive.
std::vector<int> blocks(const std::vector<int>& sizes) {
  std::vector<int> nodeOf;
  for (size_t k = 0; k < sizes.size(); ++k) nodeOf.insert(nodeOf.end(), sizes[k], int(k));
  return nodeOf;
}

std::vector<RankProgram> programsFor(const ScheduleSpec& spec) {
  std::vector<RankProgram> programs;
  for (int r = 0; r < spec.nranks; ++r) programs.push_back(buildProgram(spec, r));
  return programs;
}

TEST(TreeSchedule, OnlyAllReduceIsSupported) {
  for (Algorithm f : {Algorithm::kTree, Algorithm::kHier}) {
    EXPECT_TRUE(familySupports(f, Collective::kAllReduce));
    for (Collective s : {Collective::kReduceScatter, Collective::kAllGather, Collective::kBroadcast, Collective::kReduce})
      EXPECT_FALSE(familySupports(f, s)) << algorithmName(f) << " " << collectiveName(s);
  }
  EXPECT_EQ(channelsUsed(Algorithm::kTree, 1), 2);
  EXPECT_EQ(channelsUsed(Algorithm::kTree, 3), 2);
  EXPECT_EQ(channelsUsed(Algorithm::kTree, 4), 4);
  EXPECT_EQ(channelsUsed(Algorithm::kHier, 3), 3);
}

// Both trees span all ranks, are binary, and no rank is interior in both.
TEST(TreeSchedule, TwoSpanningBinaryTreesWithComplementaryInteriors) {
  for (int n = 1; n <= 64; ++n) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    std::vector<int> interior(n, 0);
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      std::vector<int> parentOf(n, -1);
      std::vector<int> childCount(n, 0);
      for (int r = 0; r < n; ++r) {
        TreeLinks t = treeLinks(n, tree, r);
        ASSERT_LE(t.nchildren, 2);
        if (t.parent < 0) ++roots;
        parentOf[r] = t.parent;
        for (int c = 0; c < t.nchildren; ++c) {
          ASSERT_EQ(treeLinks(n, tree, t.children[c]).parent, r) << "child " << t.children[c];
          ++childCount[r];
        }
        if (t.nchildren > 0) ++interior[r];
      }
      ASSERT_EQ(roots, 1);
      // Every rank reaches the root within treeDepth steps.
      for (int r = 0; r < n; ++r) {
        int at = r, hops = 0;
        while (parentOf[at] >= 0 && hops <= n) at = parentOf[at], ++hops;
        EXPECT_LE(hops, treeDepth(n)) << "rank " << r;
        EXPECT_EQ(parentOf[at], -1);
      }
    }
    for (int r = 0; r < n; ++r) EXPECT_LE(interior[r], 1) << "rank " << r << " interior twice";
  }
}

TEST(TreeSchedule, ProvenForRanks1To16) {
  int verified = 0;
  for (int n = 1; n <= 16; ++n) {
    for (size_t count : kCounts) {
      for (int lanes : {1, 2, 4}) {
        for (bool inPlace : {false, true}) {
          for (size_t perPiece : {size_t{0}, size_t{1}, size_t{5}, size_t{64}}) {
            if (perPiece == 1 && count == 1023 && lanes != 2) continue;  // (time)
            ScheduleSpec spec = treeSpec(n, count, lanes, inPlace, perPiece);
            // The global item order makes it deadlock-free even with one slot per channel.
            for (int slots : {1, 2}) {
              ASSERT_EQ(verifySchedule(spec, VerifyOptions{slots}), "");
              ++verified;
            }
          }
        }
      }
    }
  }
  for (int n : {17, 24, 31, 32, 33}) {
    ASSERT_EQ(verifySchedule(treeSpec(n, 300, 2, false, 7), VerifyOptions{2}), "");
    ++verified;
  }
  EXPECT_GT(verified, 1000);
}

struct Layout {
  const char* name;
  std::vector<int> nodeOf;
};

std::vector<Layout> layouts() {
  std::vector<Layout> out = {
      {"1x16", blocks({16})},
      {"2x4", blocks({4, 4})},
      {"3x3", blocks({3, 3, 3})},
      {"4x1", blocks({1, 1, 1, 1})},
      {"2+3", blocks({2, 3})},
      {"3+2", blocks({3, 2})},
      {"1x1", blocks({1})},
      {"2x1", blocks({1, 1})},
      {"1x2", blocks({2})},
      {"4x4", blocks({4, 4, 4, 4})},
      {"8x2", blocks({2, 2, 2, 2, 2, 2, 2, 2})},
      {"16x1", std::vector<int>(16)},
      {"1+15", blocks({1, 15})},
      {"1+1+3", blocks({1, 1, 3})},
      {"5+6+5", blocks({5, 6, 5})},
      {"7+9", blocks({7, 9})},       // lcm 63
      {"3+5+7", blocks({3, 5, 7})},  // lcm 105: shards = 7, not a multiple of 3 or 5
      {"interleaved 2x3", {0, 1, 0, 1, 0, 1}},
      {"ids 7,3,7,3,9", {7, 3, 7, 3, 9}},
  };
  for (int r = 0; r < 16; ++r) out[11].nodeOf[r] = r;
  return out;
}

TEST(HierSchedule, ProvenForNodeShapes) {
  int verified = 0;
  for (const Layout& layout : layouts()) {
    for (size_t count : kCounts) {
      for (int lanes : {1, 2, 3}) {
        for (bool inPlace : {false, true}) {
          for (size_t perPiece : {size_t{0}, size_t{1}, size_t{5}, size_t{64}}) {
            if (perPiece == 1 && count == 1023 && lanes != 2) continue;  // (time)
            ScheduleSpec spec = hierSpec(layout.nodeOf, count, lanes, inPlace, perPiece);
            ASSERT_EQ(verifySchedule(spec, VerifyOptions{2}), "") << layout.name;
            ++verified;
          }
        }
      }
    }
  }
  EXPECT_GT(verified, 1000);
}

TEST(HierSchedule, ProvenForEveryRankCountOnTwoNodes) {
  // n ranks as ceil(n/2) + floor(n/2), and as nodes of 3.
  for (int n = 1; n <= 16; ++n) {
    std::vector<int> halves(n), threes(n);
    for (int r = 0; r < n; ++r) halves[r] = r < (n + 1) / 2 ? 0 : 1, threes[r] = r / 3;
    for (const auto& nodeOf : {halves, threes}) {
      for (size_t count : {size_t{7}, size_t{1023}}) {
        ASSERT_EQ(verifySchedule(hierSpec(nodeOf, count, 1, false, 4), VerifyOptions{2}), "")
            << n << " ranks";
      }
    }
  }
}

TEST(HierSchedule, ShardsCoverEveryNode) {
  ScheduleSpec spec = hierSpec(blocks({2, 3}), 60, 1, false, 0);
  NodeLayout layout = nodeLayout(spec);
  EXPECT_EQ(layout.shards, 6);  // each rank of the 2-rank node owns 3, of the 3-rank node 2
  EXPECT_EQ(layout.ranksOf.size(), 2u);
  spec.nodeOf = {0, 1};
  spec.nranks = 3;
  EXPECT_THROW(nodeLayout(spec), Error);
}

TEST(HierSchedule, OneRankPerNodeIsARingAndOneNodeIsIntraOnly) {
  // One rank per node: no intra-node steps, so every step goes to another node.
  ScheduleSpec ring = hierSpec(blocks({1, 1, 1, 1}), 100, 1, false, 8);
  for (int r = 0; r < 4; ++r) {
    RankProgram p = buildProgram(ring, r);
    for (const Step& s : p.lanes[0].steps) {
      if (primSends(s.prim)) {
        EXPECT_EQ(s.sendPeer, (r + 1) % 4);
      }
      if (primReceives(s.prim)) {
        EXPECT_EQ(s.recvPeer, (r + 3) % 4);
      }
    }
  }
  // One node: only neighbours on the node ring (it is a ring all-reduce).
  ScheduleSpec intra = hierSpec(blocks({5}), 100, 1, true, 8);
  RankProgram p = buildProgram(intra, 2);
  for (const Step& s : p.lanes[0].steps) {
    if (primSends(s.prim)) {
      EXPECT_EQ(s.sendPeer, 3);
    }
    if (primReceives(s.prim)) {
      EXPECT_EQ(s.recvPeer, 1);
    }
  }
}

// The verifier catches broken tree and hier schedules.
TEST(TreeHierVerifier, CatchesAMissingFinalizeAtTheTreeRoot) {
  ScheduleSpec spec = treeSpec(6, 40, 2, false, 4);
  auto programs = programsFor(spec);
  int root = -1;
  for (int r = 0; r < 6; ++r)
    if (treeLinks(6, 0, r).parent < 0) root = r;
  for (Step& s : programs[root].lanes[0].steps) s.finalize = false;
  std::string result = verifyPrograms(spec, programs);
  EXPECT_NE(result.find("expected"), std::string::npos) << result;
}

TEST(TreeHierVerifier, CatchesALeafThatSkipsTheReduce) {
  ScheduleSpec spec = treeSpec(5, 40, 2, false, 4);
  auto programs = programsFor(spec);
  // Rank 0 is a leaf of tree 0: make it send something that is not its input (a zero-size hole
  // would deadlock; sending the output instead shows up as garbage).
  Step& first = programs[0].lanes[0].steps.front();
  ASSERT_EQ(first.prim, Prim::kSend);
  first.src.buf = Buf::kOutput;
  EXPECT_NE(verifyPrograms(spec, programs), "");
}

TEST(TreeHierVerifier, CatchesTreesSharingAChannel) {
  ScheduleSpec spec = treeSpec(3, 40, 2, false, 4);
  auto programs = programsFor(spec);
  for (auto& p : programs)
    for (Step& s : p.lanes[1].steps) s.channel = 0;
  std::string result = verifyPrograms(spec, programs);
  EXPECT_NE(result.find("lanes 0 and 1"), std::string::npos) << result;
}

TEST(TreeHierVerifier, CatchesABroadcastBeforeTheReduce) {
  ScheduleSpec spec = treeSpec(4, 8, 2, false, 8);  // one piece per lane: R(0) then B(0)
  auto programs = programsFor(spec);
  // Every rank runs its broadcast item first: the root sends what it has not reduced yet.
  for (int r = 0; r < 4; ++r) {
    auto& steps = programs[r].lanes[0].steps;
    const size_t reduceSteps = treeLinks(4, 0, r).nchildren == 2 ? 2 : 1;
    std::rotate(steps.begin(), steps.begin() + reduceSteps, steps.end());
  }
  EXPECT_NE(verifyPrograms(spec, programs), "");
}

TEST(TreeHierVerifier, CatchesAMissingInterNodeStep) {
  ScheduleSpec spec = hierSpec(blocks({2, 3}), 60, 1, false, 0);
  auto programs = programsFor(spec);
  // Rank 0 forgets to pass on a reduced piece in one of its inter-node rings.
  auto& steps = programs[0].lanes[0].steps;
  bool removed = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].prim == Prim::kRecvReduceCopySend && steps[i].count > 0) {
      steps[i].prim = Prim::kRecvReduce;
      steps[i].sendPeer = -1;
      removed = true;
      break;
    }
  }
  ASSERT_TRUE(removed);
  EXPECT_NE(verifyPrograms(spec, programs), "");
}

TEST(TreeHierVerifier, CatchesAWrongShardInTheNodeReduceScatter) {
  ScheduleSpec spec = hierSpec(blocks({3, 3}), 60, 1, true, 0);  // 3 shards of 20
  auto programs = programsFor(spec);
  Step& first = programs[4].lanes[0].steps.front();
  ASSERT_EQ(first.prim, Prim::kSend);
  first.src.offset = (first.src.offset + 20) % 60;  // sends its neighbour's shard
  std::string result = verifyPrograms(spec, programs);
  EXPECT_NE(result.find("expected"), std::string::npos) << result;
}

}  // namespace
}  // namespace braid::comm
