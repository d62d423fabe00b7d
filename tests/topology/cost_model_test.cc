// The cost model: monotone in bytes, the textbook limits, contention where links are shared.
#include "topology/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace braid::topology {
namespace {

constexpr Collective kColls[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                           Collective::kBroadcast, Collective::kReduce};
constexpr Algorithm kAlgos[] = {Algorithm::kRing, Algorithm::kOneShot, Algorithm::kChain, Algorithm::kTree, Algorithm::kHier};

ClusterGraph twoByTwoSlowNet() {
  ClusterGraph g = uniformGraph(2, 2);
  g.net = {0.125, 50, 5};
  return g;
}

TEST(CostModel, MonotoneInBytes) {
  for (const ClusterGraph& g : {uniformGraph(1, 2), uniformGraph(1, 5), twoByTwoSlowNet(),
                                uniformGraph(8, 4), uniformGraph(3, 1)}) {
    CostModel model(g);
    for (Collective coll : kColls) {
      for (Algorithm algo : kAlgos) {
        for (int lanes : {1, 2, 4}) {
          for (size_t chunk : {size_t(32) << 10, size_t(128) << 10}) {
            double last = 0;
            for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 2) {
              double t = model.predict(coll, bytes, {algo, lanes, chunk}).timeUs;
              if (!std::isfinite(t)) continue;
              EXPECT_GT(t, 0);
              EXPECT_GE(t, last * (1 - 1e-12))
                  << collectiveName(coll) << " " << algorithmName(algo) << " lanes " << lanes << " chunk "
                  << chunk << " at " << bytes << " B on " << g.size() << " ranks";
              last = t;
            }
          }
        }
      }
    }
  }
}

TEST(CostModel, UnsupportedCombinationsAreInfinite) {
  CostModel model(twoByTwoSlowNet());
  EXPECT_TRUE(std::isinf(model.predict(Collective::kAllReduce, 1024, {Algorithm::kChain, 1}).timeUs));
  EXPECT_TRUE(std::isinf(model.predict(Collective::kBroadcast, 1024, {Algorithm::kRing, 1}).timeUs));
  EXPECT_TRUE(std::isinf(model.predict(Collective::kAllGather, 1024, {Algorithm::kTree, 1}).timeUs));
  CostModel oneNode(uniformGraph(1, 4));
  EXPECT_TRUE(std::isinf(oneNode.predict(Collective::kAllReduce, 1024, {Algorithm::kHier, 1}).timeUs));
  CostModel onePerNode(uniformGraph(4, 1));
  EXPECT_TRUE(std::isinf(onePerNode.predict(Collective::kAllReduce, 1024, {Algorithm::kHier, 1}).timeUs));
}

TEST(CostModel, RingApproachesTheBusBandwidth) {
  // Two shm ranks, 256 MiB: busbw of a ring is the link's bandwidth (bench/RESULTS.md ~9.4).
  CostModel model(uniformGraph(1, 2));
  const double bytes = 256.0 * (1 << 20);
  double t = model.predict(Collective::kAllReduce, 256u << 20, {Algorithm::kRing, 1, 128 << 10}).timeUs;
  double busbw = bytes / (t * 1e3) * 2 * (2 - 1) / 2;
  EXPECT_NEAR(busbw, defaultShmLink().gbps, 0.5);
  // 8 B one-shot: one latency.
  double tiny = model.predict(Collective::kAllReduce, 8, {Algorithm::kOneShot, 1, 128 << 10}).timeUs;
  EXPECT_NEAR(tiny, defaultShmLink().latencyUs, 0.05);
}

TEST(CostModel, RanksBeyondCpusSlowSharedMemory) {
  ClusterGraph free = uniformGraph(1, 4);
  ClusterGraph crowded = free;
  crowded.nodes[0].cpus = 2;
  double a = CostModel(free).predict(Collective::kAllReduce, 64u << 20, {Algorithm::kRing, 1}).timeUs;
  double b = CostModel(crowded).predict(Collective::kAllReduce, 64u << 20, {Algorithm::kRing, 1}).timeUs;
  EXPECT_NEAR(b / a, 2.0, 0.1);
}

TEST(CostModel, NicIsSharedByTheConnectionsCrossingIt) {
  // Per-connection 10 GB/s, one 20 GB/s NIC per node: two ring lanes still fit, four do not.
  // (Shared memory fast enough not to be the bottleneck.)
  ClusterGraph g = uniformGraph(2, 4);
  g.net = {10, 5, 1};
  g.shm = {200, 0.5, 0.2};
  for (Node& n : g.nodes) {
    n.nics = 1;
    n.nicGbps = 20;
  }
  CostModel model(g);
  const size_t bytes = size_t(1) << 30;
  double one = model.predict(Collective::kAllReduce, bytes, {Algorithm::kRing, 1}).timeUs;
  double two = model.predict(Collective::kAllReduce, bytes, {Algorithm::kRing, 2}).timeUs;
  double four = model.predict(Collective::kAllReduce, bytes, {Algorithm::kRing, 4}).timeUs;
  EXPECT_LT(two, one * 0.6);
  EXPECT_GT(four, two * 0.9);
  // Hier: 4 shard rings share the 20 GB/s NIC; giving each node 4 NICs speeds it up.
  double hier = model.predict(Collective::kAllReduce, bytes, {Algorithm::kHier, 1}).timeUs;
  for (Node& n : g.nodes) n.nics = 4;
  double hierWide = CostModel(g).predict(Collective::kAllReduce, bytes, {Algorithm::kHier, 1}).timeUs;
  EXPECT_LT(hierWide, hier * 0.7);
}

TEST(CostModel, DirectCostsGrowWithPeers) {
  double four =
      CostModel(uniformGraph(1, 4)).predict(Collective::kAllReduce, 1 << 20, {Algorithm::kOneShot, 1}).timeUs;
  double sixteen =
      CostModel(uniformGraph(1, 16)).predict(Collective::kAllReduce, 1 << 20, {Algorithm::kOneShot, 1}).timeUs;
  EXPECT_GT(sixteen, four * 4);
}

TEST(CostModel, SameGraphSameNumbers) {
  CostModel a(twoByTwoSlowNet()), b(twoByTwoSlowNet());
  for (Algorithm algo : kAlgos) {
    auto pa = a.predict(Collective::kAllReduce, 12345, {algo, 1});
    auto pb = b.predict(Collective::kAllReduce, 12345, {algo, 1});
    EXPECT_EQ(pa.timeUs, pb.timeUs);
    EXPECT_EQ(pa.detail, pb.detail);
  }
}

}  // namespace
}  // namespace braid::topology
