// The nearest network device (transport/nic_locality.h) over a fake sysfs tree: two NUMA nodes,
// RDMA devices behind PCI switches on each, a GPU beside one of them.
#include "transport/nic_locality.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/transport/fake_sysfs.h"

namespace braid::transport::testing {
namespace {

TEST(NicLocality, ReadsAPciPathAndNumaNodeThroughTheClassLink) {
  FakeSysfs sys;
  sys.rdmaDevice("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0", 1);
  const DeviceLocation where = rdmaDeviceLocation(sys.root(), "mlx5_1");
  EXPECT_EQ(where.path, (std::vector<std::string>{"pci0000:80", "0000:80:01.0", "0000:81:00.0",
                                                  "0000:82:00.0"}));
  EXPECT_EQ(where.numa, 1);
  const DeviceLocation missing = rdmaDeviceLocation(sys.root(), "mlx5_9");
  EXPECT_TRUE(missing.path.empty());
  EXPECT_EQ(missing.numa, -1);
}

TEST(NicLocality, CpusMapToTheirNumaNodes) {
  FakeSysfs sys;
  sys.twoNumaNodes();
  EXPECT_EQ(numaNodesOf(sys.root(), {3}), std::vector<int>{1});
  EXPECT_EQ(numaNodesOf(sys.root(), {1, 2}), (std::vector<int>{0, 1}));
  EXPECT_TRUE(numaNodesOf(sys.root(), {7}).empty());
}

TEST(NicLocality, TheDeviceOnTheRanksNumaNodeWins) {
  FakeSysfs sys;
  sys.twoNumaNodes();
  sys.rdmaDevice("mlx5_0", "pci0000:00/0000:00:02.0/0000:03:00.0", 0);
  sys.rdmaDevice("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  const std::vector<std::string> names = {"mlx5_0", "mlx5_1"};
  NearestDevice onOne = nearestDevice(sys.root(), names, Placement{{2, 3}, ""});
  EXPECT_EQ(onOne.index, 1u) << onOne.why;
  EXPECT_EQ(onOne.why,
            "the nearest to the rank's CPUs (NUMA node 1): mlx5_0 (NUMA node 0, distance 21), "
            "mlx5_1 (NUMA node 1, distance 10)");
  NearestDevice onZero = nearestDevice(sys.root(), names, Placement{{0}, ""});
  EXPECT_EQ(onZero.index, 0u) << onZero.why;
  // CPUs on both nodes: both devices are local; the first listed.
  NearestDevice both = nearestDevice(sys.root(), names, Placement{{1, 2}, ""});
  EXPECT_EQ(both.index, 0u) << both.why;
  EXPECT_EQ(both.why.rfind("the first of the nearest to the rank's CPUs (NUMA node 0,1): ", 0), 0u)
      << both.why;
}

TEST(NicLocality, WithoutADistanceFileAcrossNodesCountsAs20AndUnknownNodesComeLast) {
  FakeSysfs sys;
  sys.numaNode(0, {0}, {});
  sys.numaNode(1, {1}, {});
  sys.rdmaDevice("a", "pci0000:00/0000:00:02.0", -1);
  sys.rdmaDevice("b", "pci0000:00/0000:00:03.0", 0);
  sys.rdmaDevice("c", "pci0000:80/0000:80:02.0", 1);
  NearestDevice pick = nearestDevice(sys.root(), {"a", "b", "c"}, Placement{{0}, ""});
  EXPECT_EQ(pick.index, 1u) << pick.why;
  EXPECT_NE(pick.why.find("a (NUMA node unknown)"), std::string::npos) << pick.why;
  EXPECT_NE(pick.why.find("c (NUMA node 1, distance 20)"), std::string::npos) << pick.why;
}

TEST(NicLocality, AGpuPrefersTheDeviceBehindItsOwnSwitch) {
  FakeSysfs sys;
  sys.twoNumaNodes();
  // Both NICs on node 1 with the GPU; mlx5_2 under the GPU's PCIe switch.
  sys.rdmaDevice("mlx5_0", "pci0000:00/0000:00:02.0/0000:03:00.0", 0);
  sys.rdmaDevice("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  sys.rdmaDevice("mlx5_2", "pci0000:80/0000:80:02.0/0000:90:00.0/0000:91:00.0", 1);
  sys.pciDevice("0000:91:01.0", "pci0000:80/0000:80:02.0/0000:90:00.0/0000:91:01.0", 1);
  const std::vector<std::string> names = {"mlx5_0", "mlx5_1", "mlx5_2"};
  // The rank's CPUs are on node 0, but its buffers are on the GPU: the GPU decides.
  NearestDevice pick = nearestDevice(sys.root(), names, Placement{{0}, "0000:91:01.0"});
  EXPECT_EQ(pick.index, 2u) << pick.why;
  EXPECT_EQ(pick.why.rfind("the nearest to the buffers' device 0000:91:01.0: ", 0), 0u) << pick.why;
  EXPECT_NE(pick.why.find("mlx5_2 (NUMA node 1, distance 10, 3 PCI levels shared)"),
            std::string::npos)
      << pick.why;
  // A device sysfs does not know: the CPUs decide.
  NearestDevice cpus = nearestDevice(sys.root(), names, Placement{{0}, "0000:ff:00.0"});
  EXPECT_EQ(cpus.index, 0u) << cpus.why;
}

TEST(NicLocality, OneOrNoDeviceNeedsNoLook) {
  FakeSysfs sys;
  EXPECT_EQ(nearestDevice(sys.root(), {"x"}, Placement{}).why, "the only one");
  EXPECT_EQ(nearestDevice(sys.root(), {}, Placement{}).why, "no device");
}

TEST(NicLocality, TheCallingThreadsPlacementListsItsCpus) {
  const Placement here = currentPlacement("0000:01:00.0");
  EXPECT_FALSE(here.cpus.empty());
  EXPECT_EQ(here.pci, "0000:01:00.0");
}

}  // namespace
}  // namespace braid::transport::testing
