// The topology file: round trips, the shipped examples, environment variables, and every kind of
// bad file named by line and field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/error.h"
#include "topology/topology.h"

namespace braid::topology {
namespace {

std::string examplePath(const std::string& name) {
  return std::string(BRAID_TOPO_EXAMPLES) + "/" + name;
}

std::string tempPath(const std::string& name) {
  return fmt::format("/tmp/braid_topo_test_{}_{}", getpid(), name);
}

ClusterGraph richGraph() {
  RankDescriptor a;
  a.host = "host a/boot";
  a.hostname = "host a [1]";
  a.cpus = "0,1";
  a.numa = 0;
  a.cores = 2;
  a.pus = 4;
  a.packages = 1;
  a.numaNodes = 1;
  a.l3Bytes = 32u << 20;
  a.devices.push_back({DeviceKind::kNic, "eth0", "0000:00:03.0", 0, 1.25});
  a.devices.push_back({DeviceKind::kGpu, "NVIDIA A100, SXM", "0000:1b:00.0", 0, 0});
  RankDescriptor b = a;
  b.host = "hostB";
  b.hostname = "hostB";
  b.cpus = "3";
  b.gpu = 0;
  ClusterGraph g = buildGraph({a, b, a, b, b});
  g.net.latencyUs = 12.5;
  g.shm.gbps = 7.25;
  return g;
}

TEST(GraphFile, RoundTripsABuiltGraph) {
  ClusterGraph g = richGraph();
  std::string text = formatGraph(g);
  EXPECT_NE(text.find("rank 1 node=hostB gpu=0"), std::string::npos) << text;
  EXPECT_EQ(parseGraph(text), g) << text;
  // And a uniform graph needs no rank lines.
  ClusterGraph u = uniformGraph(4, 3);
  std::string plain = formatGraph(u);
  EXPECT_EQ(plain.find("\nrank "), std::string::npos) << plain;
  EXPECT_EQ(parseGraph(plain), u);
}

TEST(GraphFile, SavesAndLoads) {
  ClusterGraph g = richGraph();
  std::string path = tempPath("save.topo");
  saveGraph(g, path);
  EXPECT_EQ(loadGraph(path), g);
  std::remove(path.c_str());
  EXPECT_THROW(loadGraph(path), Error);
  EXPECT_THROW(saveGraph(g, "/nonexistent-dir/x.topo"), Error);
}

TEST(GraphFile, ExamplesLoad) {
  ClusterGraph big = loadGraph(examplePath("cluster_64x8_gpu.topo"));
  EXPECT_EQ(big.size(), 512);
  ASSERT_EQ(big.nodes.size(), 64u);
  EXPECT_EQ(big.nodes[0].name, "gpu00");
  EXPECT_EQ(big.nodes[63].name, "gpu63");
  EXPECT_EQ(big.nodes[1].ranks.front(), 8);
  EXPECT_EQ(big.ranks[13].gpu, 5);
  EXPECT_TRUE(big.hasGpuLink);
  EXPECT_EQ(big.linkClass(8, 9), LinkClass::kGpu);
  EXPECT_DOUBLE_EQ(big.net.gbps, 50);          // 400 Gbit/s
  EXPECT_DOUBLE_EQ(big.nicTotalGbps(0), 400);  // 8 x 400 Gbit/s
  EXPECT_EQ(parseGraph(formatGraph(big)), big);

  ClusterGraph two = loadGraph(examplePath("hosts_2x2_1gbit.topo"));
  EXPECT_EQ(two.size(), 4);
  EXPECT_EQ(two.nodes.size(), 2u);
  EXPECT_DOUBLE_EQ(two.net.gbps, 0.125);
  EXPECT_DOUBLE_EQ(two.net.latencyUs, 50);
  EXPECT_EQ(two.nodes[1].devices.size(), 1u);
  EXPECT_EQ(parseGraph(formatGraph(two)), two);

  ClusterGraph one = loadGraph(examplePath("host_1x4.topo"));
  EXPECT_EQ(one.size(), 4);
  EXPECT_EQ(one.nodes.size(), 1u);
  EXPECT_EQ(one.nodes[0].cpus, 2);
}

TEST(GraphFile, UnitsAndRankLines) {
  ClusterGraph g = parseGraph(
      "link net bw=800Mbit/s lat=1.5ms overhead=250ns\n"
      "link shm bw=2500MB/s lat=1us\n"
      "node a ranks=2\nnode b ranks=2\n"
      "rank 0,2 node=a\nrank 1 node=b gpu=1\nrank 3 node=b cpus=4-5\n");
  EXPECT_DOUBLE_EQ(g.net.gbps, 0.1);
  EXPECT_DOUBLE_EQ(g.net.latencyUs, 1500);
  EXPECT_DOUBLE_EQ(g.net.overheadUs, 0.25);
  EXPECT_DOUBLE_EQ(g.shm.gbps, 2.5);
  EXPECT_EQ(g.nodes[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(g.ranks[1].gpu, 1);
  EXPECT_EQ(g.ranks[3].cpus, "4-5");
  EXPECT_EQ(g.ranks[2].local, 1);
  EXPECT_EQ(parseGraph(formatGraph(g)), g);
}

struct BadCase {
  const char* text;
  int line;
  const char* field;
};

TEST(GraphFile, BadFilesNameLineAndField) {
  const BadCase cases[] = {
      {"braid-topology 2\nnode a ranks=1\n", 1, "version"},
      {"# c\nfrobnicate x=1\n", 2, "statement"},
      {"link fast bw=1GB/s\nnode a ranks=1\n", 1, "class"},
      {"link net bw=1GB/s\nlink net bw=2GB/s\n", 2, "class"},
      {"link net bw=100\nnode a ranks=1\n", 1, "bw"},
      {"link net bw=fastGbit/s\n", 1, "bw"},
      {"link net bw=0Gbit/s\n", 1, "bw"},
      {"link net lat=5\n", 1, "lat"},
      {"link net overhead=x\n", 1, "overhead"},
      {"link net speed=1GB/s\n", 1, "speed"},
      {"node a\n", 1, "ranks"},
      {"node a ranks=0\n", 1, "ranks"},
      {"node a ranks=two\n", 1, "ranks"},
      {"\n\nnode a ranks=1 gpus=-1\n", 3, "gpus"},
      {"node a ranks=1 nic=10\n", 1, "nic"},
      {"node a ranks=1 l3=big\n", 1, "l3"},
      {"node a ranks=1 color=red\n", 1, "color"},
      {"node a ranks=1 ranks=2\n", 1, "ranks"},
      {"node a ranks=1 oops\n", 1, "oops"},
      {"node ranks=1\n", 1, "name"},
      {"node a ranks=1\nnode a ranks=1\n", 2, "name"},
      {"node n[3-1] ranks=1\n", 1, "name"},
      {"node n[0-3 ranks=1\n", 1, "name"},
      {"node a ranks=1\ndevice b kind=gpu\n", 2, "node"},
      {"node a ranks=1\ndevice a name=x\n", 2, "kind"},
      {"node a ranks=1\ndevice a kind=tpu\n", 2, "kind"},
      {"node a ranks=1\ndevice a kind=nic speed=9\n", 2, "speed"},
      {"node a ranks=1\ndevice a kind=nic numa=-5\n", 2, "numa"},
      {"node a ranks=1\nrank x node=a\n", 2, "rank"},
      {"node a ranks=1\nrank 0\n", 2, "node"},
      {"node a ranks=1\nrank 0 node=zz\n", 2, "node"},
      {"node a ranks=1\nrank 1 node=a\n", 2, "rank"},
      {"node a ranks=2\nrank 0 node=a\nrank 0 node=a\n", 3, "rank"},
      {"node a ranks=2\nnode b ranks=1\nrank 0-2 node=a\n", 1, "ranks"},
      {"# nothing\n\n", 2, "node"},
      {"node a%ZZ ranks=1\n", 1, "name"},
      // Sizes refused before they are allocated (fuzz/corpus/topology_file/regress_*).
      {"node n[0-1048575] ranks=16777216\n", 1, "ranks"},
      {"node a ranks=1048576\nnode b ranks=1\n", 2, "ranks"},
      {"node a ranks=1\nrank 0-1048575 node=a\nrank 0-1048575 node=a\n", 3, "rank"},
      {"node n[0-1] ranks=1\ndevice n[0-1048575] kind=gpu\n", 2, "node"},
  };
  for (const BadCase& c : cases) {
    try {
      parseGraph(c.text, "bad.topo");
      ADD_FAILURE() << "no error for:\n" << c.text;
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << what;
      EXPECT_NE(what.find(fmt::format("bad.topo line {}:", c.line)), std::string::npos)
          << "want line " << c.line << " in: " << what << "\nfor:\n"
          << c.text;
      EXPECT_NE(what.find(fmt::format("field '{}'", c.field)), std::string::npos)
          << "want field " << c.field << " in: " << what << "\nfor:\n"
          << c.text;
    }
  }
}

TEST(GraphFile, EnvironmentLoadsAndDumps) {
  std::string path = tempPath("env.topo");
  std::string dump = tempPath("dump.topo");
  saveGraph(uniformGraph(2, 3), path);
  unsetenv(kTopoFileEnv);
  EXPECT_FALSE(graphFromEnvironment(6).has_value());
  setenv(kTopoFileEnv, path.c_str(), 1);
  auto g = graphFromEnvironment(6);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->size(), 6);
  try {
    graphFromEnvironment(4);
    ADD_FAILURE() << "a 6-rank file accepted for 4 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("describes 6 ranks"), std::string::npos) << e.what();
  }
  unsetenv(kTopoFileEnv);

  unsetenv(kTopoDumpFileEnv);
  EXPECT_FALSE(dumpGraphIfAsked(*g, 0));
  setenv(kTopoDumpFileEnv, dump.c_str(), 1);
  EXPECT_FALSE(dumpGraphIfAsked(*g, 1));
  EXPECT_EQ(access(dump.c_str(), F_OK), -1);
  EXPECT_TRUE(dumpGraphIfAsked(*g, 0));
  EXPECT_EQ(loadGraph(dump), *g);
  unsetenv(kTopoDumpFileEnv);
  std::remove(path.c_str());
  std::remove(dump.c_str());
}

}  // namespace
}  // namespace braid::topology
