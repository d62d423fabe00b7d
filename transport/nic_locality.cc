#include "transport/nic_locality.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace braid::transport {

namespace {

namespace fs = std::filesystem;

std::string firstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The place of the device a sysfs link points at: its components below <sysfs>/devices and its
// numa_node (-1 where the file says so or is missing).
DeviceLocation locate(const std::string& sysfs, const fs::path& link) {
  DeviceLocation where;
  std::error_code error;
  const fs::path device = fs::canonical(link, error);
  const fs::path devices = fs::canonical(fs::path(sysfs) / "devices", error);
  if (device.empty() || devices.empty()) return where;
  const fs::path below = device.lexically_relative(devices);
  if (below.empty() || *below.begin() == "..") return where;
  for (const fs::path& part : below) where.path.push_back(part.string());
  const std::string numa = firstLine(device / "numa_node");
  if (!numa.empty() && numa.find_first_not_of("-0123456789") == std::string::npos) {
    where.numa = std::max(-1, std::atoi(numa.c_str()));
  }
  return where;
}

// The NUMA distance from `from` to `to`: <sysfs>/devices/system/node/node<from>/distance lists
// it by node index; 10 on one node, 20 across when the file does not say.
int numaDistance(const std::string& sysfs, int from, int to) {
  std::istringstream in(
      firstLine(fmt::format("{}/devices/system/node/node{}/distance", sysfs, from)));
  std::vector<int> distances;
  for (int d; in >> d;) distances.push_back(d);
  if (to >= 0 && static_cast<size_t>(to) < distances.size()) return distances[to];
  return from == to ? 10 : 20;
}

size_t sharedPrefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

std::string nodeList(const std::vector<int>& nodes) {
  std::string out;
  for (int n : nodes) {
    if (!out.empty()) out += ',';
    out += std::to_string(n);
  }
  return out;
}

}  // namespace

Placement currentPlacement(const std::string& pci) {
  Placement placement;
  placement.pci = pci;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) placement.cpus.push_back(c);
    }
  }
  return placement;
}

DeviceLocation rdmaDeviceLocation(const std::string& sysfs, const std::string& name) {
  return locate(sysfs, fs::path(sysfs) / "class" / "infiniband" / name / "device");
}

DeviceLocation pciDeviceLocation(const std::string& sysfs, const std::string& address) {
  return locate(sysfs, fs::path(sysfs) / "bus" / "pci" / "devices" / address);
}

std::vector<int> numaNodesOf(const std::string& sysfs, const std::vector<int>& cpus) {
  std::set<int> nodes;
  for (int cpu : cpus) {
    // A CPU's directory holds a link "node<N>" to its NUMA node.
    std::error_code error;
    const fs::path dir = fmt::format("{}/devices/system/cpu/cpu{}", sysfs, cpu);
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
          name.find_first_not_of("0123456789", 4) == std::string::npos) {
        nodes.insert(std::atoi(name.c_str() + 4));
      }
    }
  }
  return {nodes.begin(), nodes.end()};
}

NearestDevice nearestDevice(const std::string& sysfs, const std::vector<std::string>& names,
                            const Placement& placement) {
  NearestDevice best;
  if (names.size() <= 1) {
    best.why = names.empty() ? "no device" : "the only one";
    return best;
  }
  const DeviceLocation near =
      placement.pci.empty() ? DeviceLocation{} : pciDeviceLocation(sysfs, placement.pci);
  const bool byPci = !near.path.empty();
  const std::vector<int> nodes =
      byPci && near.numa >= 0 ? std::vector<int>{near.numa} : numaNodesOf(sysfs, placement.cpus);
  // Per device: (PCI components shared with the buffers' device, NUMA distance); more shared,
  // then less distance, is nearer.
  std::vector<std::pair<size_t, int>> keys;
  std::string listed;
  for (const std::string& name : names) {
    const DeviceLocation where = rdmaDeviceLocation(sysfs, name);
    int distance = INT_MAX;
    if (where.numa >= 0) {
      for (int node : nodes) distance = std::min(distance, numaDistance(sysfs, node, where.numa));
    }
    const size_t shared = byPci ? sharedPrefix(where.path, near.path) : 0;
    keys.emplace_back(shared, distance);
    listed += fmt::format("{}{} (NUMA node {}{}{})", listed.empty() ? "" : ", ", name,
                          where.numa >= 0 ? std::to_string(where.numa) : "unknown",
                          distance == INT_MAX ? "" : fmt::format(", distance {}", distance),
                          byPci ? fmt::format(", {} PCI levels shared", shared) : "");
  }
  for (size_t i = 1; i < keys.size(); ++i) {
    const auto& [shared, distance] = keys[i];
    const auto& [bestShared, bestDistance] = keys[best.index];
    if (shared > bestShared || (shared == bestShared && distance < bestDistance)) best.index = i;
  }
  const bool tie = std::count(keys.begin(), keys.end(), keys[best.index]) > 1;
  const std::string to = byPci ? fmt::format("the buffers' device {}", placement.pci)
                         : nodes.empty()
                             ? std::string("the rank's CPUs (their NUMA node unknown)")
                             : fmt::format("the rank's CPUs (NUMA node {})", nodeList(nodes));
  best.why =
      fmt::format("{} to {}: {}", tie ? "the first of the nearest" : "the nearest", to, listed);
  return best;
}

}  // namespace braid::transport
