// The tuner: the cheapest candidate that can run, today's single-node rule, and the errors of
// forced algorithms that cannot.
#include "comm/tuner.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "topology/topology.h"

namespace braid::comm {
namespace {

// Tree and hier all-reduce built (whatever the schedules of this checkout say).
bool allSupported(Family family, Shape shape) {
  switch (family) {
    case Family::kRing:
      return shape == Shape::kAllReduce || shape == Shape::kReduceScatter ||
             shape == Shape::kAllGather;
    case Family::kDirect:
      return true;
    case Family::kChain:
      return shape == Shape::kBroadcast || shape == Shape::kReduce;
    case Family::kTree:
    case Family::kHier:
      return shape == Shape::kAllReduce;
  }
  return false;
}

TunerConfig configFor(const topology::ClusterGraph& g) {
  TunerConfig c;
  c.nranks = g.size();
  c.model = makeTunerModel(g);
  c.supports = &allSupported;
  return c;
}

topology::ClusterGraph example(const std::string& name) {
  return topology::loadGraph(std::string(BRAID_TOPO_EXAMPLES) + "/" + name);
}

TEST(Tuner, OneNodeDirectForTinyRingForHuge) {
  for (int n : {2, 3, 4, 8, 16}) {
    TunerConfig c;  // no model: one node of shm ranks
    c.nranks = n;
    EXPECT_EQ(choose(c, Shape::kAllReduce, 8).family, Family::kDirect) << n;
    EXPECT_EQ(choose(c, Shape::kAllReduce, 1024).family, Family::kDirect) << n;
    EXPECT_EQ(choose(c, Shape::kAllReduce, 256u << 20).family, Family::kRing) << n;
    EXPECT_EQ(choose(c, Shape::kAllGather, 64u << 20).family, Family::kRing) << n;
    EXPECT_EQ(choose(c, Shape::kBroadcast, 8).family, Family::kDirect) << n;
    EXPECT_EQ(choose(c, Shape::kBroadcast, 256u << 20).family, Family::kChain) << n;
    EXPECT_EQ(choose(c, Shape::kReduce, 256u << 20).family, Family::kChain) << n;
    Choice big = choose(c, Shape::kAllReduce, 256u << 20);
    EXPECT_EQ(big.lanes, 1);
    EXPECT_GT(big.predictedUs, 0);
  }
}

TEST(Tuner, OneNodeKeepsTodaysRuleAcrossSizes) {
  // The rule the communicator had before the model: direct up to 32 KiB per peer (and within the
  // slots), else ring / chain; with the configured lanes.
  for (int n : {2, 4, 8}) {
    for (int channels : {1, 2}) {
      TunerConfig c = configFor(topology::uniformGraph(1, n));
      c.channels = channels;
      for (Shape shape : {Shape::kAllReduce, Shape::kReduceScatter, Shape::kAllGather,
                          Shape::kBroadcast, Shape::kReduce}) {
        for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 4) {
          size_t perPeer = directBytesPerPeer(shape, bytes, n);
          bool rooted = shape == Shape::kBroadcast || shape == Shape::kReduce;
          Family want = perPeer <= (32u << 10) ? Family::kDirect
                        : rooted               ? Family::kChain
                                               : Family::kRing;
          Choice got = choose(c, shape, bytes);
          EXPECT_EQ(got.family, want)
              << shapeName(shape) << " " << bytes << " B, " << n << " ranks";
          // Lanes: the configured ones unless the model clearly prefers fewer (a shorter
          // pipeline fill for chains of many ranks).
          if (want == Family::kDirect || channels == 1) {
            EXPECT_EQ(got.lanes, want == Family::kDirect ? 1 : channels);
          } else {
            EXPECT_GE(got.lanes, 1);
            EXPECT_LE(got.lanes, channels);
            if (n <= 4 && shape != Shape::kBroadcast && shape != Shape::kReduce) {
              EXPECT_EQ(got.lanes, channels)
                  << shapeName(shape) << " " << bytes << " B, " << n << " ranks\n"
                  << explain(c, shape, bytes);
            }
          }
        }
      }
    }
  }
}

TEST(Tuner, TreeForSmallOnManyNodesHierForLarge) {
  TunerConfig c = configFor(example("cluster_64x8_gpu.topo"));
  EXPECT_EQ(choose(c, Shape::kAllReduce, 8).family, Family::kTree);
  EXPECT_EQ(choose(c, Shape::kAllReduce, 64 << 10).family, Family::kTree);
  EXPECT_EQ(choose(c, Shape::kAllReduce, size_t(1) << 30).family, Family::kHier);
  // Without tree and hier (e.g. schedules not built) the ring takes over.
  c.supports = [](Family f, Shape s) {
    return (f != Family::kTree && f != Family::kHier) && allSupported(f, s);
  };
  EXPECT_EQ(choose(c, Shape::kAllReduce, size_t(1) << 30).family, Family::kRing);
}

TEST(Tuner, HierOnMultiNodeLarge) {
  TunerConfig c = configFor(topology::uniformGraph(4, 4));
  Choice large = choose(c, Shape::kAllReduce, 256u << 20);
  EXPECT_EQ(large.family, Family::kHier) << explain(c, Shape::kAllReduce, 256u << 20);
  EXPECT_EQ(choose(c, Shape::kAllReduce, 8).family, Family::kDirect);
  // One rank per node: no hier.
  TunerConfig flat = configFor(topology::uniformGraph(8, 1));
  EXPECT_NE(choose(flat, Shape::kAllReduce, 256u << 20).family, Family::kHier);
}

TEST(Tuner, ImpossibleForcedChoicesAreErrors) {
  TunerConfig c = configFor(topology::uniformGraph(1, 4));
  c.forced = Algorithm::kChain;
  EXPECT_THROW(choose(c, Shape::kAllReduce, 1024), Error);
  c.forced = Algorithm::kOneShot;
  EXPECT_THROW(choose(c, Shape::kAllReduce, 64u << 20), Error);
  EXPECT_EQ(choose(c, Shape::kAllReduce, 1024).family, Family::kDirect);
  c.forced = Algorithm::kHier;  // one node: forced, it runs as its intra-node phases
  EXPECT_EQ(choose(c, Shape::kAllReduce, 1 << 20).family, Family::kHier);
  EXPECT_THROW(choose(c, Shape::kReduceScatter, 1 << 20), Error);  // hier is all-reduce only
  c.forced = Algorithm::kTree;
  EXPECT_THROW(choose(c, Shape::kBroadcast, 1024), Error);
  Choice tree = choose(c, Shape::kAllReduce, 1 << 20);
  EXPECT_EQ(tree.family, Family::kTree);
  EXPECT_GT(tree.predictedUs, 0);
  c.forced = Algorithm::kRing;
  EXPECT_EQ(choose(c, Shape::kAllReduce, 8).family, Family::kRing);
}

TEST(Tuner, GraphOfAnotherSizeFallsBackToOneNode) {
  TunerConfig c = configFor(topology::uniformGraph(4, 4));
  c.nranks = 3;
  EXPECT_EQ(choose(c, Shape::kAllReduce, 8).family, Family::kDirect);
  EXPECT_EQ(choose(c, Shape::kAllReduce, 64u << 20).family, Family::kRing);
}

TEST(Tuner, ExplainNamesWinnerLosersAndExclusions) {
  TunerConfig c = configFor(topology::uniformGraph(1, 4));
  std::string text = explain(c, Shape::kAllReduce, 64u << 20);
  EXPECT_NE(text.find("ring x1"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen"), std::string::npos) << text;
  EXPECT_NE(text.find("oneshot  excluded"), std::string::npos) << text;
  EXPECT_NE(text.find("chain    excluded: cannot run allreduce"), std::string::npos) << text;
  EXPECT_NE(text.find("hier     excluded: all ranks are on one node"), std::string::npos) << text;
  EXPECT_NE(text.find("tree"), std::string::npos) << text;

  auto reports = rankCandidates(c, Shape::kAllReduce, 64u << 20);
  ASSERT_EQ(reports.size(), 5u);
  int chosen = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    chosen += reports[i].chosen;
    if (i > 0) {
      EXPECT_GE(reports[i].predictedUs, reports[i - 1].predictedUs);
    }
  }
  EXPECT_EQ(chosen, 1);
}

TEST(Tuner, EqualInputsEqualChoices) {
  TunerConfig a = configFor(example("hosts_2x2_1gbit.topo"));
  TunerConfig b = configFor(example("hosts_2x2_1gbit.topo"));
  for (size_t bytes = 8; bytes <= (size_t(1) << 28); bytes *= 2) {
    Choice x = choose(a, Shape::kAllReduce, bytes), y = choose(b, Shape::kAllReduce, bytes);
    EXPECT_EQ(x.family, y.family);
    EXPECT_EQ(x.lanes, y.lanes);
    EXPECT_EQ(x.chunkBytes, y.chunkBytes);
    EXPECT_EQ(x.predictedUs, y.predictedUs);
    // Cached: the second call agrees with the first.
    Choice z = choose(a, Shape::kAllReduce, bytes);
    EXPECT_EQ(z.family, x.family);
    EXPECT_EQ(z.predictedUs, x.predictedUs);
  }
}

}  // namespace
}  // namespace braid::comm
