#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/env.h"
#include "topology/topology.h"

namespace braid::topology {

std::string machineFingerprint() {
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return bootId;
}

std::string hostFingerprint() {
  if (auto name = envString("BRAID_HOSTNAME")) return *name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + machineFingerprint();
}

std::string cpuSetText() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return "0";
  std::string text;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &cpus)) continue;
    if (!text.empty()) text += ',';
    text += std::to_string(c);
  }
  return text.empty() ? "0" : text;
}

int cpuCountOfUnion(const std::vector<std::string>& cpuSets) {
  std::set<int> all;
  for (const std::string& text : cpuSets) {
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (!item.empty()) all.insert(std::atoi(item.c_str()));
    }
  }
  return static_cast<int>(all.size());
}

}  // namespace braid::topology
