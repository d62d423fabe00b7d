// Building the cluster graph from descriptors, and its queries.
#include <gtest/gtest.h>

#include "common/error.h"
#include "topology/topology.h"

namespace braid::topology {
namespace {

RankDescriptor on(const std::string& host, const std::string& hostname, const std::string& cpus) {
  RankDescriptor d;
  d.host = host;
  d.hostname = hostname;
  d.cpus = cpus;
  d.cores = 2;
  d.pus = 2;
  d.packages = 1;
  d.numaNodes = 1;
  return d;
}

TEST(BuildGraph, GroupsRanksByHostFingerprint) {
  RankDescriptor a = on("hostA/boot1", "alpha", "0");
  a.devices.push_back({DeviceKind::kNic, "eth0", "0000:00:03.0", 0, 12.5});
  a.devices.push_back({DeviceKind::kNic, "eth1", "0000:00:04.0", 0, 12.5});
  a.devices.push_back({DeviceKind::kNic, "mgmt0", "0000:00:06.0", 0, 0.125});  // not counted
  a.devices.push_back({DeviceKind::kGpu, "gpu", "0000:00:05.0", 0, 0});
  RankDescriptor a2 = a;
  a2.cpus = "1";
  RankDescriptor b = on("hostB/boot2", "beta", "0,1");
  RankDescriptor b2 = on("hostB/boot2", "beta", "0,1");
  ClusterGraph g = buildGraph({a, b, a2, b2, b});
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.size(), 5);
  EXPECT_EQ(g.nodes[0].name, "alpha");
  EXPECT_EQ(g.nodes[0].host, "hostA/boot1");
  EXPECT_EQ(g.nodes[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(g.nodes[1].ranks, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(g.ranks[2].node, 0);
  EXPECT_EQ(g.ranks[2].local, 1);
  EXPECT_EQ(g.ranks[4].local, 2);
  EXPECT_EQ(g.nodes[0].cpus, 2);  // "0" and "1"
  EXPECT_EQ(g.nodes[1].cpus, 2);  // three ranks share "0,1": oversubscribed
  EXPECT_EQ(g.nodes[0].nics, 2);
  EXPECT_EQ(g.nodes[0].gpus, 1);
  EXPECT_DOUBLE_EQ(g.nodes[0].nicGbps, 12.5);
  EXPECT_DOUBLE_EQ(g.nicTotalGbps(0), 25);
  EXPECT_DOUBLE_EQ(g.nicTotalGbps(1), g.net.gbps);  // no NIC known: the net link's speed
  EXPECT_EQ(g.maxLocalRanks(), 3);
  EXPECT_EQ(g.linkClass(0, 2), LinkClass::kShm);
  EXPECT_EQ(g.linkClass(0, 1), LinkClass::kNet);
  EXPECT_NO_THROW(g.validate());
}

TEST(BuildGraph, SameHostnameDifferentMachinesGetDistinctNames) {
  ClusterGraph g = buildGraph({on("box/1", "box", "0"), on("box/2", "box", "0")});
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "box");
  EXPECT_EQ(g.nodes[1].name, "box#1");
}

TEST(BuildGraph, LocalDescriptorsOfOneProcessMakeOneNode) {
  RankDescriptor self = localDescriptor();
  ClusterGraph g = buildGraph({self, self, self});
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].ranks.size(), 3u);
}

TEST(BuildGraph, GpuRanksUseTheGpuLinkOnlyWhenDescribed) {
  RankDescriptor a = on("h", "h", "0");
  a.gpu = 0;
  RankDescriptor b = a;
  b.gpu = 1;
  ClusterGraph g = buildGraph({a, b});
  EXPECT_EQ(g.linkClass(0, 1), LinkClass::kShm);
  g.hasGpuLink = true;
  EXPECT_EQ(g.linkClass(0, 1), LinkClass::kGpu);
  EXPECT_EQ(g.params(LinkClass::kGpu), g.gpu);
}

TEST(BuildGraph, EmptyIsAnError) { EXPECT_THROW(buildGraph({}), Error); }

TEST(UniformGraph, PlacesRanksNodeByNode) {
  ClusterGraph g = uniformGraph(3, 4);
  EXPECT_EQ(g.size(), 12);
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodeOf(5), 1);
  EXPECT_EQ(g.ranks[5].local, 1);
  EXPECT_NO_THROW(g.validate());
  EXPECT_THROW(uniformGraph(0, 4), Error);
}

TEST(Validate, CatchesInconsistentGraphs) {
  ClusterGraph g = uniformGraph(2, 2);
  g.ranks[3].node = 0;
  EXPECT_THROW(g.validate(), Error);
  g = uniformGraph(2, 2);
  g.net.gbps = 0;
  EXPECT_THROW(g.validate(), Error);
}

TEST(DescribeGraph, NamesNodesAndLinks) {
  ClusterGraph g = uniformGraph(2, 2);
  std::string text = describeGraph(g);
  EXPECT_NE(text.find("4 ranks on 2 node(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("link net"), std::string::npos) << text;
  EXPECT_NE(text.find("node n1"), std::string::npos) << text;
}

}  // namespace
}  // namespace braid::topology
