#include <unistd.h>

#include <fstream>

#include "common/env.h"
#include "topology/topology.h"

namespace braid::topology {

std::string hostFingerprint() {
  if (auto name = envString("BRAID_HOSTNAME")) return *name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return std::string(host) + "/" + bootId;
}

}  // namespace braid::topology
