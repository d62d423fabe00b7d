// Which network device is nearest a rank, from sysfs: a device's place is its path below
// /sys/devices (the PCI root complex, then the bridges and switches down to it) and its NUMA node;
// a rank's is the NUMA nodes of the CPUs it runs on, or, when its buffers live on a device (a
// GPU), that device's PCI path. Used by the verbs transport to pick among several RDMA devices
// (BRAID_VERBS_DEVICE unset). Pure over a sysfs root, so tests give it a fake tree. Internal to
// transport/.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::transport {

/// Where a rank's data are.
struct Placement {
  std::vector<int> cpus;  ///< the CPUs it runs on (OS indices), empty: unknown
  std::string pci;        ///< PCI address of the device holding its buffers ("0000:1b:00.0"), ""
                          ///< for host memory
};
/// The calling thread's CPUs (sched_getaffinity) and `pci`.
Placement currentPlacement(const std::string& pci = "");

/// A device as sysfs places it.
struct DeviceLocation {
  std::vector<std::string> path;  ///< components below /sys/devices ("pci0000:00",
                                  ///< "0000:00:02.0", "0000:03:00.0"), empty: unknown
  int numa = -1;                  ///< its NUMA node, -1 unknown
};
/// An RDMA device by its ibverbs name: `sysfs`/class/infiniband/<name>/device.
DeviceLocation rdmaDeviceLocation(const std::string& sysfs, const std::string& name);
/// A PCI device by its address: `sysfs`/bus/pci/devices/<address>.
DeviceLocation pciDeviceLocation(const std::string& sysfs, const std::string& address);

/// The NUMA nodes holding any of `cpus` (`sysfs`/devices/system/node/node*/cpulist), ascending.
std::vector<int> numaNodesOf(const std::string& sysfs, const std::vector<int>& cpus);

/// The choice among `names` (RDMA devices, in the order the library lists them): the index of the
/// nearest and one line saying why. Near means, when `placement.pci` names a device sysfs knows:
/// most PCI path components shared with it (same switch before same root complex), then the NUMA
/// rule; else the smallest NUMA distance (`sysfs`/devices/system/node/nodeN/distance; 10 on the
/// same node, 20 across when the file is missing) from a node of the rank's CPUs; a device whose
/// node is unknown comes last. Ties go to the earlier name.
struct NearestDevice {
  size_t index = 0;
  std::string why;
};
NearestDevice nearestDevice(const std::string& sysfs, const std::vector<std::string>& names,
                            const Placement& placement);

}  // namespace braid::transport
