// What the machine looks like: the one public header of topology/. Host identity, what one rank
// discovers about its host (RankDescriptor), the cluster graph every rank builds from all ranks'
// descriptors (ClusterGraph), and the graph's text file (topology/README.md). The cost model that
// prices collectives on a graph is topology/cost_model.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::topology {

/// Identifies this host so ranks can be grouped into nodes: BRAID_HOSTNAME when set, else the
/// hostname plus the kernel boot id (two containers with one hostname on different machines
/// differ). Ranks with equal fingerprints may use shared memory.
std::string hostFingerprint();
/// Identifies the machine (the kernel's boot id), whatever host name a rank poses as: ranks in
/// network namespaces or containers of one machine share its CPUs though their hosts differ.
/// "" when the boot id cannot be read.
std::string machineFingerprint();

/// The CPUs this thread may run on (sched_getaffinity), as a comma-separated list of indices.
std::string cpuSetText();
/// How many distinct CPUs the given cpuSetText() lists name together.
int cpuCountOfUnion(const std::vector<std::string>& cpuSets);

// ---- Discovery ----

enum class DeviceKind : uint8_t { kGpu, kNic, kOther };
/// "gpu", "nic", "other".
const char* deviceKindName(DeviceKind kind);

/// A PCI (or virtual) device of a host that matters for communication.
struct Device {
  DeviceKind kind = DeviceKind::kOther;
  std::string name;  ///< "eth0", "mlx5_0", "NVIDIA H100 80GB HBM3", ...
  std::string pci;   ///< PCI bus id "0000:1b:00.0", or "" when not on PCI
  int numa = -1;     ///< nearest NUMA node, -1 unknown
  double gbps = 0;   ///< link speed in GB/s (1e9 bytes/s) for NICs; 0 unknown
  bool operator==(const Device&) const = default;
};

/// What one rank knows about itself and its host. The rank is its index in the vector given to
/// buildGraph(). Plain data: serializeDescriptor() / parseDescriptor() carry it between ranks.
struct RankDescriptor {
  std::string host;      ///< hostFingerprint(): equal on ranks of one node
  std::string hostname;  ///< display name (BRAID_HOSTNAME or gethostname())
  std::string machine;   ///< machineFingerprint(): equal on ranks sharing one kernel's CPUs
  std::string cpus;      ///< cpuSetText() of the describing thread
  int numa = -1;         ///< the NUMA node holding all of `cpus`, -1 unknown or several
  int gpu = -1;          ///< local GPU index this rank drives, -1 for host memory
  int packages = 0;      ///< CPU sockets of the host (0 unknown)
  int numaNodes = 0;
  int cores = 0;         ///< physical cores
  int pus = 0;           ///< hardware threads
  uint64_t l2Bytes = 0;  ///< size of one L2 cache (0 unknown)
  uint64_t l3Bytes = 0;  ///< size of one L3 cache (0 unknown)
  int l3Count = 0;
  std::vector<Device> devices;
  bool fromHwloc = false;  ///< false: the reduced discovery (no hwloc in this build)
  bool operator==(const RankDescriptor&) const = default;
};

/// Describes the calling rank and its host: hwloc (when built with it) for packages, NUMA nodes,
/// cores, caches and PCI GPUs/NICs with their NUMA locality; /sys and sched_getaffinity for the
/// rest. Hardware is probed once per process; host identity and CPU set are read on every call.
/// Never throws for missing information (fields stay unknown).
RankDescriptor localDescriptor();

/// One line of text (no newline) that parseDescriptor() reads back exactly.
std::string serializeDescriptor(const RankDescriptor& descriptor);
/// Throws kInvalidUsage naming the field when `text` is not a serializeDescriptor() line.
RankDescriptor parseDescriptor(const std::string& text);

// ---- The cluster graph ----

/// The link classes the cost model prices.
enum class LinkClass : uint8_t {
  kShm,  ///< two ranks of one node through host shared memory
  kGpu,  ///< two GPU ranks of one node over NVLink / PCIe peer-to-peer (when described)
  kNet,  ///< ranks on different nodes
};
/// "shm", "gpu", "net".
const char* linkClassName(LinkClass link);

/// Alpha-beta parameters of one link class: a message of b bytes in pieces takes
/// latencyUs + pieces * overheadUs + b / (gbps * 1e3) microseconds.
struct LinkParams {
  double gbps = 0;        ///< GB/s (1e9 bytes/s) of one connection
  double latencyUs = 0;   ///< one-way latency of a message
  double overheadUs = 0;  ///< cost of each further piece (slot) of a message
  bool operator==(const LinkParams&) const = default;
};

/// Measured on this project's reference VM (bench/RESULTS.md: 2 ranks, 256 MiB all-reduce busbw
/// ~9.4 GB/s; 8 B ~0.3-1 us): shared memory between two cores.
LinkParams defaultShmLink();
/// One TCP connection over a 10 Gbit/s network.
LinkParams defaultNetLink();
/// NVLink-class GPU peer links (used only when a file or discovery describes GPU links).
LinkParams defaultGpuLink();

struct Node {
  std::string name;        ///< unique display name ("n0", a hostname)
  std::string host;        ///< fingerprint of the ranks on it ("" when loaded from a file)
  std::vector<int> ranks;  ///< global ranks on this node, ascending
  int packages = 0, numaNodes = 0, cores = 0, pus = 0;  ///< 0 = unknown
  int cpus = 0;  ///< CPUs its ranks may run on together (contention: ranks > cpus), 0 unknown
  uint64_t l3Bytes = 0;
  int gpus = 0;
  int nics = 0;        ///< NICs usable for inter-node traffic (0 = 1 implied)
  double nicGbps = 0;  ///< GB/s of one NIC; 0 = the net link's bandwidth
  std::vector<Device> devices;
  bool operator==(const Node&) const = default;
};

struct RankInfo {
  int node = 0;   ///< index into ClusterGraph::nodes
  int local = 0;  ///< index among the node's ranks
  int gpu = -1;   ///< local GPU index, -1 for host memory
  int numa = -1;
  std::string cpus;
  bool operator==(const RankInfo&) const = default;
};

/// Ranks, nodes, devices and link classes, identical on every rank of a communicator. Links are
/// classes (shm inside a node, gpu between GPU ranks of a node when hasGpuLink, net between
/// nodes) plus each node's NICs, which all its inter-node connections share.
struct ClusterGraph {
  std::vector<Node> nodes;
  std::vector<RankInfo> ranks;
  LinkParams shm = defaultShmLink();
  LinkParams gpu = defaultGpuLink();
  LinkParams net = defaultNetLink();
  bool hasGpuLink = false;  ///< GPU ranks of a node talk over `gpu` (else over `shm`)
  bool operator==(const ClusterGraph&) const = default;

  int size() const { return static_cast<int>(ranks.size()); }
  int nodeOf(int rank) const { return ranks.at(rank).node; }
  /// The most ranks on one node.
  int maxLocalRanks() const;
  /// Which class connects two distinct ranks.
  LinkClass linkClass(int a, int b) const;
  const LinkParams& params(LinkClass link) const;
  /// Aggregate NIC bandwidth of a node in GB/s (nics x nicGbps, defaults applied).
  double nicTotalGbps(int node) const;
  /// Throws kInvalidUsage when ranks and nodes disagree (every rank on exactly one node, ranks
  /// 0..size-1, positive bandwidths).
  void validate() const;
};

/// Groups ranks into nodes by host fingerprint (nodes ordered by their lowest rank), takes each
/// node's hardware from its lowest rank's descriptor, NIC speeds from its NICs (the default net
/// link when unknown) and counts the CPUs its ranks may use. descriptors[r] describes rank r.
ClusterGraph buildGraph(const std::vector<RankDescriptor>& descriptors);

/// A graph of `nodes` x `ranksPerNode` host-memory ranks with default links and no device
/// details (what the tuner assumes when it is given no graph: nodes = 1).
ClusterGraph uniformGraph(int nodes, int ranksPerNode);

// ---- The topology file (format: topology/README.md) ----

/// Environment variable naming a topology file to use instead of discovery.
inline constexpr const char* kTopoFileEnv = "BRAID_TOPO_FILE";
/// Environment variable naming a file where rank 0 writes the graph in use.
inline constexpr const char* kTopoDumpFileEnv = "BRAID_TOPO_DUMP_FILE";

/// The most ranks a topology file may describe (a million: beyond any job braid runs, and a
/// bound on what a short line such as "node n[0-1048575] ranks=16" may make the parser allocate).
inline constexpr int64_t kMaxTopologyRanks = int64_t{1} << 20;

/// The graph as the text file's lines (parseGraph() reads it back to an equal graph).
std::string formatGraph(const ClusterGraph& graph);
/// Reads a topology file's text. `source` names it in errors, which say
/// "<source> line N: field 'F': what is wrong" and are thrown as kInvalidUsage.
/// maxRanks bounds what the node and rank lines may declare (kInvalidUsage beyond it).
ClusterGraph parseGraph(const std::string& text, const std::string& source = "topology",
                        int64_t maxRanks = kMaxTopologyRanks);
/// formatGraph() into `path`; throws kSystemError when it cannot be written.
void saveGraph(const ClusterGraph& graph, const std::string& path);
/// parseGraph() of the file at `path`; kSystemError when unreadable, kInvalidUsage when bad.
ClusterGraph loadGraph(const std::string& path);

/// The graph named by BRAID_TOPO_FILE, or nullopt when unset. Throws kInvalidUsage when the file
/// is bad or describes a number of ranks other than `expectedRanks` (when > 0).
std::optional<ClusterGraph> graphFromEnvironment(int expectedRanks = 0);
/// When BRAID_TOPO_DUMP_FILE is set and rank == 0, saves `graph` there. Returns whether it wrote.
bool dumpGraphIfAsked(const ClusterGraph& graph, int rank);

/// Human-readable summary: nodes, ranks, devices, link classes (braid-topo, BRAID_DEBUG=INFO).
std::string describeGraph(const ClusterGraph& graph);

}  // namespace braid::topology
