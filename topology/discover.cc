// localDescriptor(): hwloc when the build has it, /sys otherwise (and for NICs hwloc leaves out,
// e.g. virtio devices), sched_getaffinity for the rank's CPUs.
#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "common/config.h"
#include "common/env.h"
#include "topology/text.h"
#include "topology/topology.h"

#if BRAID_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace braid::topology {
namespace {

// What a host looks like; probed once per process.
struct Hardware {
  int packages = 0, numaNodes = 0, cores = 0, pus = 0;
  uint64_t l2Bytes = 0, l3Bytes = 0;
  int l3Count = 0;
  std::vector<std::set<int>> numaCpus;  // OS CPU indices of each NUMA node, by OS index
  std::vector<Device> devices;
  bool fromHwloc = false;
};

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(dir);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::set<int> cpuList(const std::string& text) {
  std::set<int> out;
  if (auto list = text::parseIntList(text)) out.insert(list->begin(), list->end());
  return out;
}

// Link speed of a network interface in GB/s from /sys (Mb/s there; -1 or absent: unknown).
double netSpeedGbps(const std::string& ifname) {
  auto mbps = text::parseInt(readFirstLine("/sys/class/net/" + ifname + "/speed"));
  return mbps && *mbps > 0 ? static_cast<double>(*mbps) / 8e3 : 0;
}

// Rate of port 1 of an InfiniBand device ("100 Gb/sec (4X EDR)") in GB/s.
[[maybe_unused]] double ibSpeedGbps(const std::string& device) {
  std::string rate = readFirstLine("/sys/class/infiniband/" + device + "/ports/1/rate");
  double gbit = std::atof(rate.c_str());
  return gbit > 0 ? gbit / 8 : 0;
}

// The PCI address in a sysfs device path (".../0000:00:03.0/virtio2" -> "0000:00:03.0").
std::string pciOfPath(const std::string& path) {
  std::string found;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (part.size() == 12 && part[4] == ':' && part[7] == ':' && part[10] == '.') found = part;
  }
  return found;
}

void probeSysfs(Hardware& hw) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  hw.pus = online > 0 ? static_cast<int>(online) : 1;
  std::set<int> packages;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < hw.pus; ++cpu) {
    std::string base = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
    auto pkg = text::parseInt(readFirstLine(base + "physical_package_id"));
    auto core = text::parseInt(readFirstLine(base + "core_id"));
    if (pkg) packages.insert(static_cast<int>(*pkg));
    if (pkg && core) cores.insert({static_cast<int>(*pkg), static_cast<int>(*core)});
  }
  hw.packages = packages.empty() ? 1 : static_cast<int>(packages.size());
  hw.cores = cores.empty() ? hw.pus : static_cast<int>(cores.size());
  for (const std::string& name : listDir("/sys/devices/system/node")) {
    if (name.rfind("node", 0) != 0) continue;
    auto index = text::parseInt(name.substr(4));
    if (!index || *index < 0 || *index > 4096) continue;
    if (hw.numaCpus.size() <= static_cast<size_t>(*index)) hw.numaCpus.resize(*index + 1);
    hw.numaCpus[*index] = cpuList(readFirstLine("/sys/devices/system/node/" + name + "/cpulist"));
    ++hw.numaNodes;
  }
  if (hw.numaNodes == 0) hw.numaNodes = 1;
  for (const std::string& index : listDir("/sys/devices/system/cpu/cpu0/cache")) {
    std::string base = "/sys/devices/system/cpu/cpu0/cache/" + index + "/";
    auto level = text::parseInt(readFirstLine(base + "level"));
    auto bytes = parseBytes(readFirstLine(base + "size"));
    if (!level || !bytes) continue;
    if (*level == 2) hw.l2Bytes = *bytes;
    if (*level == 3) {
      hw.l3Bytes = *bytes;
      hw.l3Count = 1;
    }
  }
  // GPUs on PCI: class 0x0302 (3D controller) or 0x0300 (VGA) from NVIDIA or AMD.
  for (const std::string& bus : listDir("/sys/bus/pci/devices")) {
    std::string base = "/sys/bus/pci/devices/" + bus + "/";
    unsigned long cls = std::strtoul(readFirstLine(base + "class").c_str(), nullptr, 16);
    unsigned long vendor = std::strtoul(readFirstLine(base + "vendor").c_str(), nullptr, 16);
    bool gpu =
        (cls >> 8) == 0x0302 || ((cls >> 8) == 0x0300 && (vendor == 0x10de || vendor == 0x1002));
    if (!gpu) continue;
    Device d;
    d.kind = DeviceKind::kGpu;
    d.pci = bus;
    d.name = fmt::format("pci {:04x} gpu", vendor);
    auto numa = text::parseInt(readFirstLine(base + "numa_node"));
    d.numa = numa && *numa >= 0 ? static_cast<int>(*numa) : (hw.numaNodes == 1 ? 0 : -1);
    hw.devices.push_back(d);
  }
}

// Network interfaces backed by a device (not lo, bridges, ifb, veth) that are not listed yet.
void addSysfsNics(Hardware& hw) {
  for (const std::string& ifname : listDir("/sys/class/net")) {
    char target[4096] = {};
    std::string link = "/sys/class/net/" + ifname;
    ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    std::string path = n > 0 ? std::string(target, n) : "";
    if (path.find("/virtual/") != std::string::npos) continue;
    if (access((link + "/device").c_str(), F_OK) != 0) continue;
    bool listed = false;
    for (const Device& d : hw.devices)
      listed = listed || (d.kind == DeviceKind::kNic && d.name == ifname);
    if (listed) continue;
    Device d;
    d.kind = DeviceKind::kNic;
    d.name = ifname;
    d.pci = pciOfPath(path);
    d.gbps = netSpeedGbps(ifname);
    auto numa = text::parseInt(readFirstLine(link + "/device/numa_node"));
    d.numa = numa && *numa >= 0 ? static_cast<int>(*numa) : (hw.numaNodes == 1 ? 0 : -1);
    hw.devices.push_back(d);
  }
}

#if BRAID_HAVE_HWLOC
std::set<int> bitmapSet(hwloc_const_bitmap_t bitmap) {
  std::set<int> out;
  if (!bitmap) return out;
  for (int i = hwloc_bitmap_first(bitmap); i >= 0; i = hwloc_bitmap_next(bitmap, i)) out.insert(i);
  return out;
}

bool probeHwloc(Hardware& hw) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return false;
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return false;
  }
  hw.fromHwloc = true;
  hw.packages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
  hw.numaNodes = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE));
  hw.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  hw.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  if (hwloc_obj_t l2 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L2CACHE, 0)) {
    hw.l2Bytes = l2->attr->cache.size;
  }
  hw.l3Count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_L3CACHE);
  if (hwloc_obj_t l3 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L3CACHE, 0)) {
    hw.l3Bytes = l3->attr->cache.size;
  }
  hw.numaCpus.clear();
  for (int i = 0; i < hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    if (hw.numaCpus.size() <= node->os_index) hw.numaCpus.resize(node->os_index + 1);
    hw.numaCpus[node->os_index] = bitmapSet(node->cpuset);
  }
  hw.devices.clear();
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const auto& attr = pci->attr->pcidev;
    const unsigned cls = attr.class_id;
    Device d;
    if ((cls >> 8) == 0x02) {
      d.kind = DeviceKind::kNic;
    } else if (cls == 0x0302 ||
               (cls == 0x0300 && (attr.vendor_id == 0x10de || attr.vendor_id == 0x1002))) {
      d.kind = DeviceKind::kGpu;
    } else {
      continue;
    }
    d.pci = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", attr.domain, attr.bus, attr.dev, attr.func);
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo, pci);
    std::set<int> numa = parent ? bitmapSet(parent->nodeset) : std::set<int>{};
    d.numa = numa.size() == 1 ? *numa.begin() : (hw.numaNodes == 1 ? 0 : -1);
    // The OS devices below it name it: eth0 / ib0 (network), mlx5_0 (openfabrics).
    for (hwloc_obj_t child = pci->io_first_child; child; child = child->next_sibling) {
      if (child->type != HWLOC_OBJ_OS_DEVICE || !child->name) continue;
      auto type = child->attr->osdev.type;
      if (type == HWLOC_OBJ_OSDEV_NETWORK && d.name.empty()) {
        d.name = child->name;
        d.gbps = netSpeedGbps(d.name);
      } else if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
        d.name = child->name;
        d.gbps = std::max(d.gbps, ibSpeedGbps(child->name));
      }
    }
    if (d.name.empty()) {
      const char* model = hwloc_obj_get_info_by_name(pci, "PCIDevice");
      d.name = model ? model : fmt::format("pci {:04x}:{:04x}", attr.vendor_id, attr.device_id);
    }
    hw.devices.push_back(d);
  }
  // Kept for the life of the process on purpose (this runs once per process): destroying the
  // last topology unloads hwloc's PCI plugin, whose libpciaccess state then leaks from an
  // unloaded module, which LeakSanitizer reports without a usable stack.
  static hwloc_topology_t keptAlive = nullptr;
  if (keptAlive != nullptr) hwloc_topology_destroy(keptAlive);
  keptAlive = topo;
  return true;
}
#endif

const Hardware& hardware() {
  static Hardware hw;
  static std::once_flag once;
  std::call_once(once, [] {
    probeSysfs(hw);
#if BRAID_HAVE_HWLOC
    Hardware fromHwloc = hw;
    if (probeHwloc(fromHwloc)) hw = fromHwloc;
#endif
    addSysfsNics(hw);
  });
  return hw;
}

std::string shortHostname() {
  if (auto name = envString("BRAID_HOSTNAME")) return *name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

const char* deviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kNic:
      return "nic";
    case DeviceKind::kOther:
      break;
  }
  return "other";
}

RankDescriptor localDescriptor() {
  const Hardware& hw = hardware();
  RankDescriptor d;
  d.host = hostFingerprint();
  d.hostname = shortHostname();
  d.machine = machineFingerprint();
  d.cpus = cpuSetText();
  d.packages = hw.packages;
  d.numaNodes = hw.numaNodes;
  d.cores = hw.cores;
  d.pus = hw.pus;
  d.l2Bytes = hw.l2Bytes;
  d.l3Bytes = hw.l3Bytes;
  d.l3Count = hw.l3Count;
  d.devices = hw.devices;
  d.fromHwloc = hw.fromHwloc;
  std::set<int> mine = cpuList(d.cpus);
  for (size_t i = 0; i < hw.numaCpus.size() && !mine.empty(); ++i) {
    const auto& node = hw.numaCpus[i];
    if (std::includes(node.begin(), node.end(), mine.begin(), mine.end()))
      d.numa = static_cast<int>(i);
  }
  return d;
}

}  // namespace braid::topology
