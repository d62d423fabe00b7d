// What the machine looks like: the one public header of topology/ (for now: host identity).
#pragma once

#include <string>
#include <vector>

namespace braid::topology {

/// Identifies this host so ranks can be grouped into nodes: BRAID_HOSTNAME when set, else the
/// hostname plus the kernel boot id (two containers with one hostname on different machines
/// differ). Ranks with equal fingerprints may use shared memory.
std::string hostFingerprint();

/// The CPUs this thread may run on (sched_getaffinity), as a comma-separated list of indices.
std::string cpuSetText();
/// How many distinct CPUs the given cpuSetText() lists name together.
int cpuCountOfUnion(const std::vector<std::string>& cpuSets);

}  // namespace braid::topology
