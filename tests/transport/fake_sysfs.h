// A fake sysfs tree in a temporary folder, shaped like the kernel's where the nearest network
// device is looked up (transport/nic_locality.h): NUMA nodes with their CPUs and distances, RDMA
// devices (class/infiniband/<name>/device -> a PCI path below devices/) and PCI devices
// (bus/pci/devices/<address>), each with its numa_node.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/transport/test_support.h"

namespace braid::transport::testing {

class FakeSysfs {
 public:
  const std::string& root() const { return dir_.path; }

  /// Two NUMA nodes: 0 with CPUs 0 and 1, 1 with CPUs 2 and 3, 21 apart.
  void twoNumaNodes() {
    numaNode(0, {0, 1}, {10, 21});
    numaNode(1, {2, 3}, {21, 10});
  }

  /// NUMA node `node` holding `cpus` (devices/system/cpu/cpuN/nodeK links), with its distances
  /// to every node (devices/system/node/nodeK/distance; none: no file).
  void numaNode(int node, const std::vector<int>& cpus, const std::vector<int>& distances) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(root()) / "devices/system/node" / ("node" + std::to_string(node));
    fs::create_directories(dir);
    if (!distances.empty()) {
      std::string line;
      for (int d : distances) {
        if (!line.empty()) line += ' ';
        line += std::to_string(d);
      }
      write(dir / "distance", line);
    }
    for (int cpu : cpus) {
      const fs::path cpuDir =
          fs::path(root()) / "devices/system/cpu" / ("cpu" + std::to_string(cpu));
      fs::create_directories(cpuDir);
      fs::create_directory_symlink(dir, cpuDir / ("node" + std::to_string(node)));
    }
  }
  /// An RDMA device `name` at `path` below devices/ on NUMA node `numa` (-1: unknown).
  void rdmaDevice(const std::string& name, const std::string& path, int numa) {
    link("class/infiniband/" + name + "/device", path, numa);
  }
  /// A PCI device (a GPU) at `address`.
  void pciDevice(const std::string& address, const std::string& path, int numa) {
    link("bus/pci/devices/" + address, path, numa);
  }

 private:
  static void write(const std::filesystem::path& file, const std::string& text) {
    std::ofstream out(file);
    out << text << "\n";
  }
  void link(const std::string& from, const std::string& path, int numa) {
    namespace fs = std::filesystem;
    const fs::path device = fs::path(root()) / "devices" / path;
    fs::create_directories(device);
    write(device / "numa_node", std::to_string(numa));
    const fs::path at = fs::path(root()) / from;
    fs::create_directories(at.parent_path());
    fs::create_directory_symlink(device, at);
  }

  TempDir dir_{"braid-sysfs"};
};

}  // namespace braid::transport::testing
