#include "transport/verbs/device.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "common/env.h"

namespace braid::transport::verbs {

namespace {

const char* portStateName(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_ACTIVE:
      return "active";
    case IBV_PORT_DOWN:
      return "down";
    case IBV_PORT_INIT:
      return "init";
    case IBV_PORT_ARMED:
      return "armed";
    default:
      return "not active";
  }
}

bool ipv4Mapped(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof prefix) == 0;
}

bool zeroGid(const ibv_gid& gid) {
  static const ibv_gid zero{};
  return std::memcmp(gid.raw, zero.raw, sizeof zero.raw) == 0;
}

// The GID of an Ethernet port: forced, else the first RoCE v2 IPv4-mapped one, else the first
// RoCE v2 one, else index 0. False with c->why set when none fits.
bool chooseGid(ibv_context* context, const ibv_port_attr& attr, DeviceChoice* c) {
  const std::optional<int64_t> forced = envInt("BRAID_VERBS_GID_INDEX");
  if (forced) {
    if (*forced < 0 || *forced >= attr.gid_tbl_len) {
      c->why = fmt::format("BRAID_VERBS_GID_INDEX={} is outside {} port {}'s GID table (0..{})",
                           *forced, c->name, c->port, attr.gid_tbl_len - 1);
      return false;
    }
    if (verbsCalls().query_gid(context, static_cast<uint8_t>(c->port), static_cast<int>(*forced),
                               &c->gid) != 0 ||
        zeroGid(c->gid)) {
      c->why = fmt::format("BRAID_VERBS_GID_INDEX={}: {} port {} has no GID there", *forced,
                           c->name, c->port);
      return false;
    }
    c->gidIndex = static_cast<int>(*forced);
    c->gidHow = "BRAID_VERBS_GID_INDEX";
    return true;
  }
  int firstV2 = -1;
  ibv_gid firstV2Gid{};
  for (int i = 0; i < attr.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    if (verbsCalls().query_gid_ex(context, static_cast<uint32_t>(c->port), static_cast<uint32_t>(i),
                                  &entry, 0) != 0) {
      continue;  // an empty entry (ENODATA)
    }
    if (entry.gid_type != IBV_GID_TYPE_ROCE_V2 || zeroGid(entry.gid)) continue;
    if (ipv4Mapped(entry.gid)) {
      c->gidIndex = i;
      c->gid = entry.gid;
      c->gidHow = "the first RoCE v2 IPv4-mapped GID";
      return true;
    }
    if (firstV2 < 0) {
      firstV2 = i;
      firstV2Gid = entry.gid;
    }
  }
  if (firstV2 >= 0) {
    c->gidIndex = firstV2;
    c->gid = firstV2Gid;
    c->gidHow = "the first RoCE v2 GID (none IPv4-mapped)";
    return true;
  }
  if (verbsCalls().query_gid(context, static_cast<uint8_t>(c->port), 0, &c->gid) == 0 &&
      !zeroGid(c->gid)) {
    c->gidIndex = 0;
    c->gidHow = "GID 0 (no RoCE v2 GID listed)";
    return true;
  }
  c->why = fmt::format("{} port {} (Ethernet) has no usable GID", c->name, c->port);
  return false;
}

DeviceChoice lookUp(const std::string& forced, const Placement& placement,
                    const std::string& sysfs) {
  DeviceChoice c;
  std::string wantName = forced;
  int wantPort = 0;
  if (const size_t colon = forced.rfind(':'); colon != std::string::npos) {
    wantName = forced.substr(0, colon);
    wantPort = std::atoi(forced.c_str() + colon + 1);
  }
  int count = 0;
  errno = 0;
  ibv_device** list = verbsCalls().get_device_list(&count);
  if (list == nullptr || count == 0) {
    const int error = errno;
    if (list != nullptr) verbsCalls().free_device_list(list);
    c.why = list == nullptr
                ? fmt::format("no RDMA device (ibv_get_device_list: {})", std::strerror(error))
                : "no RDMA device (ibv_get_device_list lists none)";
    c.listed = "none";
    return c;
  }
  std::string firstFailure;
  std::vector<DeviceChoice> usable;  // every active port that fits, in the library's order
  for (int d = 0; d < count; ++d) {
    const std::string name = verbsCalls().get_device_name(list[d]);
    const bool named = !forced.empty() && name == wantName;
    ibv_context* context = verbsCalls().open_device(list[d]);
    if (context == nullptr) {
      c.listed += fmt::format("{}{} (cannot open: {})", c.listed.empty() ? "" : ", ", name,
                              std::strerror(errno));
      continue;
    }
    ibv_device_attr deviceAttr{};
    const int ports =
        verbsCalls().query_device(context, &deviceAttr) == 0 ? deviceAttr.phys_port_cnt : 0;
    for (int p = 1; p <= ports; ++p) {
      ibv_port_attr attr{};
      if (verbsCalls().query_port(context, static_cast<uint8_t>(p), &attr) != 0) continue;
      const bool ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      c.listed += fmt::format("{}{} port {} {} ({})", c.listed.empty() ? "" : ", ", name, p,
                              portStateName(attr.state), ethernet ? "Ethernet" : "InfiniBand");
      const bool wanted = forced.empty() ? true : named && (wantPort == 0 || wantPort == p);
      if (!wanted || attr.state != IBV_PORT_ACTIVE) continue;
      DeviceChoice candidate;
      candidate.name = name;
      candidate.port = p;
      candidate.ethernet = ethernet;
      candidate.lid = attr.lid;
      candidate.mtu = attr.active_mtu;
      if (ethernet || envInt("BRAID_VERBS_GID_INDEX")) {
        if (!chooseGid(context, attr, &candidate)) {
          if (firstFailure.empty()) firstFailure = candidate.why;
          continue;
        }
      }
      candidate.usable = true;
      usable.push_back(std::move(candidate));
    }
    verbsCalls().close_device(context);
  }
  verbsCalls().free_device_list(list);
  if (!usable.empty()) {
    std::string listed = std::move(c.listed);
    if (!forced.empty()) {
      c = std::move(usable.front());
      c.how = "BRAID_VERBS_DEVICE";
    } else if (usable.size() == 1) {
      c = std::move(usable.front());
      c.how = "the only active port";
    } else {
      std::vector<std::string> names;
      for (const DeviceChoice& u : usable) names.push_back(u.name);
      NearestDevice nearest = nearestDevice(sysfs, names, placement);
      c = std::move(usable[nearest.index]);
      c.how = std::move(nearest.why);
    }
    c.listed = std::move(listed);
  }
  if (!c.usable) {
    c.why = !firstFailure.empty() ? firstFailure
            : forced.empty()
                ? fmt::format("no active RDMA port (devices: {})", c.listed)
                : fmt::format("BRAID_VERBS_DEVICE={}: no such active device port (devices: {})",
                              forced, c.listed);
  }
  return c;
}

}  // namespace

std::string gidText(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.raw, text, sizeof text) == nullptr) return "?";
  return text;
}

DeviceChoice chooseDevice() { return chooseDevice(currentPlacement()); }

DeviceChoice chooseDevice(const Placement& placement, const std::string& sysfs) {
  static std::mutex mutex;
  using Key = std::tuple<std::string, std::string, int, std::vector<int>, std::string, std::string>;
  static std::map<Key, DeviceChoice> cache;
  // The model's device count stands for the calls table (0: libibverbs).
  const Key key(envString("BRAID_VERBS_DEVICE").value_or(""),
                envString("BRAID_VERBS_GID_INDEX").value_or(""),
                usingVerbsModel() ? modelDevices() : 0, placement.cpus, placement.pci, sysfs);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    DeviceChoice c;
    try {
      c = lookUp(std::get<0>(key), placement, sysfs);
    } catch (const std::exception& e) {  // a malformed BRAID_VERBS_GID_INDEX
      c = DeviceChoice{};
      c.why = e.what();
    }
    it = cache.emplace(key, std::move(c)).first;
  }
  return it->second;
}

}  // namespace braid::transport::verbs
