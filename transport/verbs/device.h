// Which RDMA device, port and GID the verbs transport uses: BRAID_VERBS_DEVICE names a device
// ("mlx5_0", or "mlx5_0:2" for port 2); unset, among the devices with an active port (and a GID
// where it needs one) the one nearest the rank (transport/nic_locality.h: sharing the most PCI
// path with the device its buffers are on, else on the NUMA node of its CPUs or the nearest to
// it; ties: the first listed). On an Ethernet port (RoCE) the GID is BRAID_VERBS_GID_INDEX, else
// the first RoCE v2 GID holding an IPv4-mapped address, else the first RoCE v2 GID, else GID 0.
// The choice is looked up once per setting and placement, and says why.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "transport/nic_locality.h"
#include "transport/verbs/calls.h"

namespace braid::transport::verbs {

struct DeviceChoice {
  bool usable = false;         ///< a device with an active port (and, on Ethernet, a GID) was found
  std::string name;            ///< ibv_get_device_name: "rxe0", "mlx5_0"
  int port = 1;                ///< its port number (1-based)
  bool ethernet = false;       ///< link layer Ethernet (RoCE): addressed by GID, not LID
  int gidIndex = -1;           ///< the GID table index used (-1: none, InfiniBand without a GRH)
  ibv_gid gid{};               ///< that GID
  uint16_t lid = 0;            ///< the port's LID (InfiniBand)
  ibv_mtu mtu = IBV_MTU_1024;  ///< the port's active MTU
  std::string how;     ///< how it was chosen ("BRAID_VERBS_DEVICE", "the only active port", "the
                       ///< nearest to the rank's CPUs (NUMA node 1): mlx5_0 (NUMA node 0, ...")
  std::string gidHow;  ///< how the GID was chosen
  std::string why;     ///< !usable: what failed, in one line
  std::string listed;  ///< every device and its ports' states, for messages
};

/// The device for the current BRAID_VERBS_DEVICE and BRAID_VERBS_GID_INDEX nearest `placement`,
/// localities read under `sysfs` (looked up once per values, placement, sysfs root and calls
/// table: libibverbs or the model; thread-safe).
DeviceChoice chooseDevice(const Placement& placement, const std::string& sysfs = "/sys");
/// The same for the calling thread's CPUs (currentPlacement()).
DeviceChoice chooseDevice();

/// "fe80::5054:ff:fe12:3456" / "::ffff:10.0.2.15": a GID as text.
std::string gidText(const ibv_gid& gid);

}  // namespace braid::transport::verbs
