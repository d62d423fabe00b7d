// localDescriptor() on this machine: sane counts, host identity, the hwloc parts when built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "common/config.h"
#include "tests/support/skip.h"
#include "topology/topology.h"

namespace braid::topology {
namespace {

std::set<int> cpusOf(const std::string& text) {
  std::set<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.insert(std::atoi(item.c_str()));
  return out;
}

TEST(Discovery, CountsAreSane) {
  RankDescriptor d = localDescriptor();
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_GE(d.packages, 1);
  EXPECT_GE(d.numaNodes, 1);
  EXPECT_GE(d.cores, 1);
  EXPECT_GE(d.pus, d.cores);
  EXPECT_GE(d.cores, d.packages);
  EXPECT_EQ(d.pus, online);
  EXPECT_EQ(d.gpu, -1);  // host-memory ranks
  std::set<int> cpus = cpusOf(d.cpus);
  ASSERT_FALSE(cpus.empty());
  EXPECT_LT(*cpus.rbegin(), 4096);
  EXPECT_EQ(static_cast<int>(cpus.size()), cpuCountOfUnion({d.cpus}));
  if (d.numaNodes == 1) {
    EXPECT_EQ(d.numa, 0);
  }
  for (const Device& dev : d.devices) {
    EXPECT_FALSE(dev.name.empty());
    EXPECT_GE(dev.gbps, 0);
    EXPECT_LT(dev.numa, d.numaNodes);
  }
  // Probed once: a second call sees the same hardware.
  RankDescriptor again = localDescriptor();
  EXPECT_EQ(again.devices, d.devices);
  EXPECT_EQ(again.cores, d.cores);
}

TEST(Discovery, NetworkInterfacesWithADeviceAreNics) {
  if (access("/sys/class/net/eth0/device", F_OK) != 0) {
    BRAID_SKIP_NO_DEVICE("this machine has no eth0 backed by a device");
  }
  RankDescriptor d = localDescriptor();
  bool found = false;
  for (const Device& dev : d.devices)
    found = found || (dev.kind == DeviceKind::kNic && dev.name == "eth0");
  EXPECT_TRUE(found) << serializeDescriptor(d);
}

TEST(Discovery, HwlocFindsCachesAndCores) {
#if BRAID_HAVE_HWLOC
  RankDescriptor d = localDescriptor();
  EXPECT_TRUE(d.fromHwloc);
  EXPECT_GT(d.l2Bytes + d.l3Bytes, 0u) << "hwloc saw no L2 or L3 cache";
  if (d.l3Bytes) {
    EXPECT_GE(d.l3Count, 1);
  }
#else
  BRAID_SKIP_MISSING("built without hwloc (libhwloc-dev): the reduced /sys discovery is in use");
#endif
}

TEST(Discovery, BraidHostnameOverridesHostIdentity) {
  const char* old = std::getenv("BRAID_HOSTNAME");
  std::string saved = old ? old : "";
  setenv("BRAID_HOSTNAME", "fake-node-7", 1);
  RankDescriptor d = localDescriptor();
  EXPECT_EQ(d.host, "fake-node-7");
  EXPECT_EQ(d.hostname, "fake-node-7");
  EXPECT_EQ(hostFingerprint(), "fake-node-7");
  if (old) {
    setenv("BRAID_HOSTNAME", saved.c_str(), 1);
  } else {
    unsetenv("BRAID_HOSTNAME");
  }
  EXPECT_NE(localDescriptor().host, "fake-node-7");
}

}  // namespace
}  // namespace braid::topology
