// The tuner: the cheapest candidate that can run, today's single-node rule, and the errors of
// forced algorithms that cannot.
#include "comm/detail/tuner.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "topology/topology.h"

namespace braid::comm {
namespace {

// Tree and hier all-reduce built (whatever the schedules of this checkout say).
bool allSupported(Algorithm family, Collective shape) {
  switch (family) {
    case Algorithm::kRing:
      return shape == Collective::kAllReduce || shape == Collective::kReduceScatter ||
             shape == Collective::kAllGather;
    case Algorithm::kOneShot:
      return true;
    case Algorithm::kChain:
      return shape == Collective::kBroadcast || shape == Collective::kReduce;
    case Algorithm::kTree:
    case Algorithm::kHier:
      return shape == Collective::kAllReduce;
    case Algorithm::kPairwise:
      return shape == Collective::kAllToAll;
    case Algorithm::kSingleCopy:  // only where init found peer memory readable: not here
    case Algorithm::kRankOrder:   // only with BRAID_DETERMINISTIC
    case Algorithm::kAuto:
      break;
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
    EXPECT_EQ(choose(c, Collective::kAllReduce, 8).family, Algorithm::kOneShot) << n;
    EXPECT_EQ(choose(c, Collective::kAllReduce, 1024).family, Algorithm::kOneShot) << n;
    EXPECT_EQ(choose(c, Collective::kAllReduce, 256u << 20).family, Algorithm::kRing) << n;
    EXPECT_EQ(choose(c, Collective::kAllGather, 64u << 20).family, Algorithm::kRing) << n;
    EXPECT_EQ(choose(c, Collective::kBroadcast, 8).family, Algorithm::kOneShot) << n;
    EXPECT_EQ(choose(c, Collective::kBroadcast, 256u << 20).family, Algorithm::kChain) << n;
    EXPECT_EQ(choose(c, Collective::kReduce, 256u << 20).family, Algorithm::kChain) << n;
    Choice big = choose(c, Collective::kAllReduce, 256u << 20);
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
      for (Collective shape : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                          Collective::kBroadcast, Collective::kReduce}) {
        for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 4) {
          size_t perPeer = directBytesPerPeer(shape, bytes, n);
          bool rooted = shape == Collective::kBroadcast || shape == Collective::kReduce;
          Algorithm want = perPeer <= (32u << 10) ? Algorithm::kOneShot
                        : rooted               ? Algorithm::kChain
                                               : Algorithm::kRing;
          Choice got = choose(c, shape, bytes);
          EXPECT_EQ(got.family, want)
              << collectiveName(shape) << " " << bytes << " B, " << n << " ranks";
          // Lanes: the configured ones unless the model clearly prefers fewer (a shorter
          // pipeline fill for chains of many ranks).
          if (want == Algorithm::kOneShot || channels == 1) {
            EXPECT_EQ(got.lanes, want == Algorithm::kOneShot ? 1 : channels);
          } else {
            EXPECT_GE(got.lanes, 1);
            EXPECT_LE(got.lanes, channels);
            if (n <= 4 && shape != Collective::kBroadcast && shape != Collective::kReduce) {
              EXPECT_EQ(got.lanes, channels)
                  << collectiveName(shape) << " " << bytes << " B, " << n << " ranks\n"
                  << explain(c, shape, bytes);
            }
          }
        }
      }
    }
  }
}

// All-to-all: direct on one node at every size; across nodes direct while blocks are small and
// the pairwise exchange from 4 MiB per peer (incast); a forced family is kept, others refused.
TEST(Tuner, AllToAllDirectOnOneNodePairwiseForLargeBlocksAcrossNodes) {
  for (int n : {2, 4, 8, 16}) {
    TunerConfig one = configFor(topology::uniformGraph(1, n));
    for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 4)
      EXPECT_EQ(choose(one, Collective::kAllToAll, bytes * n).family, Algorithm::kOneShot)
          << n << " ranks, " << bytes << " B per peer\n"
          << explain(one, Collective::kAllToAll, bytes * n);
  }
  for (const auto& [nodes, perNode] : {std::pair{4, 1}, std::pair{2, 2}, std::pair{4, 4}}) {
    TunerConfig many = configFor(topology::uniformGraph(nodes, perNode));
    const int n = nodes * perNode;
    EXPECT_EQ(choose(many, Collective::kAllToAll, size_t(8) * n).family, Algorithm::kOneShot);
    EXPECT_EQ(choose(many, Collective::kAllToAll, size_t(4 << 10) * n).family,
              Algorithm::kOneShot);
    EXPECT_EQ(choose(many, Collective::kAllToAll, size_t(1 << 20) * n).family,
              Algorithm::kOneShot)
        << explain(many, Collective::kAllToAll, size_t(1 << 20) * n);
    for (size_t perPeer : {size_t(4) << 20, size_t(64) << 20}) {
      const std::string why = explain(many, Collective::kAllToAll, perPeer * n);
      EXPECT_EQ(choose(many, Collective::kAllToAll, perPeer * n).family, Algorithm::kPairwise)
          << why;
      EXPECT_NE(why.find("pairwise"), std::string::npos) << why;
      EXPECT_NE(why.find("oneshot"), std::string::npos) << why;
    }
    many.forced = Algorithm::kOneShot;
    EXPECT_EQ(choose(many, Collective::kAllToAll, size_t(64 << 20) * n).family,
              Algorithm::kOneShot);
  }
  TunerConfig c = configFor(topology::uniformGraph(1, 4));
  c.forced = Algorithm::kPairwise;
  EXPECT_EQ(choose(c, Collective::kAllToAll, 64).family, Algorithm::kPairwise);
  EXPECT_THROW(choose(c, Collective::kGather, 64), Error);
  c.forced = Algorithm::kRing;
  try {
    choose(c, Collective::kAllToAll, 64);
    ADD_FAILURE() << "ring ran an all-to-all";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("choose one of: auto, oneshot, pairwise"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tuner, TreeForSmallOnManyNodesHierForLarge) {
  TunerConfig c = configFor(example("cluster_64x8_gpu.topo"));
  EXPECT_EQ(choose(c, Collective::kAllReduce, 8).family, Algorithm::kTree);
  EXPECT_EQ(choose(c, Collective::kAllReduce, 64 << 10).family, Algorithm::kTree);
  EXPECT_EQ(choose(c, Collective::kAllReduce, size_t(1) << 30).family, Algorithm::kHier);
  // Without tree and hier (e.g. schedules not built) the ring takes over.
  c.supports = [](Algorithm f, Collective s) {
    return (f != Algorithm::kTree && f != Algorithm::kHier) && allSupported(f, s);
  };
  EXPECT_EQ(choose(c, Collective::kAllReduce, size_t(1) << 30).family, Algorithm::kRing);
}

TEST(Tuner, HierOnMultiNodeLarge) {
  TunerConfig c = configFor(topology::uniformGraph(4, 4));
  Choice large = choose(c, Collective::kAllReduce, 256u << 20);
  EXPECT_EQ(large.family, Algorithm::kHier) << explain(c, Collective::kAllReduce, 256u << 20);
  EXPECT_EQ(choose(c, Collective::kAllReduce, 8).family, Algorithm::kOneShot);
  // One rank per node: no hier.
  TunerConfig flat = configFor(topology::uniformGraph(8, 1));
  EXPECT_NE(choose(flat, Collective::kAllReduce, 256u << 20).family, Algorithm::kHier);
}

TEST(Tuner, ImpossibleForcedChoicesAreErrors) {
  TunerConfig c = configFor(topology::uniformGraph(1, 4));
  c.forced = Algorithm::kChain;
  EXPECT_THROW(choose(c, Collective::kAllReduce, 1024), Error);
  c.forced = Algorithm::kOneShot;
  EXPECT_THROW(choose(c, Collective::kAllReduce, 64u << 20), Error);
  EXPECT_EQ(choose(c, Collective::kAllReduce, 1024).family, Algorithm::kOneShot);
  c.forced = Algorithm::kHier;  // one node: forced, it runs as its intra-node phases
  EXPECT_EQ(choose(c, Collective::kAllReduce, 1 << 20).family, Algorithm::kHier);
  EXPECT_THROW(choose(c, Collective::kReduceScatter, 1 << 20), Error);  // hier is all-reduce only
  c.forced = Algorithm::kTree;
  EXPECT_THROW(choose(c, Collective::kBroadcast, 1024), Error);
  Choice tree = choose(c, Collective::kAllReduce, 1 << 20);
  EXPECT_EQ(tree.family, Algorithm::kTree);
  EXPECT_GT(tree.predictedUs, 0);
  c.forced = Algorithm::kRing;
  EXPECT_EQ(choose(c, Collective::kAllReduce, 8).family, Algorithm::kRing);
}

TEST(Tuner, GraphOfAnotherSizeFallsBackToOneNode) {
  TunerConfig c = configFor(topology::uniformGraph(4, 4));
  c.nranks = 3;
  EXPECT_EQ(choose(c, Collective::kAllReduce, 8).family, Algorithm::kOneShot);
  EXPECT_EQ(choose(c, Collective::kAllReduce, 64u << 20).family, Algorithm::kRing);
}

TEST(Tuner, ExplainNamesWinnerLosersAndExclusions) {
  TunerConfig c = configFor(topology::uniformGraph(1, 4));
  std::string text = explain(c, Collective::kAllReduce, 64u << 20);
  EXPECT_NE(text.find("ring x1"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen"), std::string::npos) << text;
  EXPECT_NE(text.find("oneshot  excluded"), std::string::npos) << text;
  EXPECT_NE(text.find("chain    excluded: cannot run allreduce"), std::string::npos) << text;
  EXPECT_NE(text.find("hier     excluded: all ranks are on one node"), std::string::npos) << text;
  EXPECT_NE(text.find("tree"), std::string::npos) << text;
  EXPECT_NE(text.find("singlecopy excluded"), std::string::npos) << text;

  auto reports = rankCandidates(c, Collective::kAllReduce, 64u << 20);
  ASSERT_EQ(reports.size(), 7u);
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
    Choice x = choose(a, Collective::kAllReduce, bytes), y = choose(b, Collective::kAllReduce, bytes);
    EXPECT_EQ(x.family, y.family);
    EXPECT_EQ(x.lanes, y.lanes);
    EXPECT_EQ(x.chunkBytes, y.chunkBytes);
    EXPECT_EQ(x.predictedUs, y.predictedUs);
    // Cached: the second call agrees with the first.
    Choice z = choose(a, Collective::kAllReduce, bytes);
    EXPECT_EQ(z.family, x.family);
    EXPECT_EQ(z.predictedUs, x.predictedUs);
  }
}

}  // namespace
}  // namespace braid::comm
