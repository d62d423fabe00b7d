// Creation step 2: what every rank derives alike from the meeting: the node of each rank, the
// transport to each peer, slot and lane sizes (larger across hosts) and the tuner's cluster
// model; and whether this host's ranks outnumber their CPUs.
#include <algorithm>
#include <map>

#include "comm/detail/create.h"
#include "comm/detail/tuner.h"
#include "comm/schedule/schedule.h"

namespace braid::create {
namespace {

// Node of each rank: the index of the first rank with its host key, renumbered densely.
int numberNodes(const std::vector<std::string>& hosts, std::vector<int>* nodeOf) {
  nodeOf->assign(hosts.size(), 0);
  std::map<std::string, int> nodeByHost;
  for (size_t q = 0; q < hosts.size(); ++q) {
    auto [it, fresh] = nodeByHost.emplace(hosts[q], static_cast<int>(nodeByHost.size()));
    (*nodeOf)[q] = it->second;
  }
  return static_cast<int>(nodeByHost.size());
}

}  // namespace

MachineShare machineShare(const Meeting& meeting, int rank) {
  // The ranks sharing this rank's CPUs are those on its machine (one kernel), whatever transport
  // joins them and whatever host they pose as: network namespaces or containers of one machine
  // share its cores though their hosts differ (4 namespace hosts x 2 ranks on 2 cores are 8
  // ranks on 2 cores). A rank that names no machine counts by host.
  const auto& self = meeting.descriptors[rank];
  std::vector<std::string> cpus;
  for (size_t q = 0; q < meeting.descriptors.size(); ++q) {
    const auto& peer = meeting.descriptors[q];
    const bool same = self.machine.empty() || peer.machine.empty()
                          ? meeting.hosts[q] == meeting.hosts[rank]
                          : peer.machine == self.machine;
    if (same) cpus.push_back(peer.cpus);
  }
  return {static_cast<int>(cpus.size()), topology::cpuCountOfUnion(cpus)};
}

Plan plan(CommState& state, const Meeting& meeting, const Joining& joining) {
  const int rank = state.rank, size = state.size;
  ResolvedOptions& options = state.options;
  Plan plan;
  transport::EndpointConfig& config = plan.config;
  config.rank = rank;
  config.size = size;
  config.jobId = meeting.jobId;
  config.secret = joining.secret;
  config.advertiseAddress = joining.advertiseAddress;
  config.timeoutSeconds = options.timeoutSeconds;
  config.slots = options.slots;
  // The backend of each peer (BRAID_TRANSPORT forcing, else shm > ucx > tcp): transport's choice.
  config.peerKinds = transport::chooseKinds(rank, meeting.hosts, options.transport);
  plan.nodes = numberNodes(meeting.hosts, &state.nodeOf);
  // Across hosts the defaults are larger slots and more lanes (comm::defaultSlotBytes). Given
  // values win.
  if (plan.nodes > 1) {
    if (!options.chunkSet) options.slotBytes = comm::defaultSlotBytes(plan.nodes);
    if (!options.channelsSet) options.channels = comm::defaultChannels(plan.nodes);
  }
  config.slotBytes = options.slotBytes;
  // The double binary tree runs one tree per channel: open two whenever it may run.
  config.channels = options.channels;
  if (options.algorithm == Algorithm::kAuto || options.algorithm == Algorithm::kTree) {
    config.channels =
        std::max(config.channels, comm::channelsUsed(Algorithm::kTree, options.channels));
  }
  // Every rank holds the same cluster graph for the tuner (or the graph of BRAID_TOPO_FILE, e.g.
  // a cluster described by hand).
  topology::ClusterGraph graph = topology::buildGraph(meeting.descriptors);
  if (auto loaded = topology::graphFromEnvironment(size)) graph = std::move(*loaded);
  topology::dumpGraphIfAsked(graph, rank);
  state.tunerModel = comm::makeTunerModel(std::move(graph));
  plan.localRanks = 0;
  for (int q = 0; q < size; ++q) plan.localRanks += meeting.hosts[q] == meeting.hosts[rank];
  const MachineShare share = machineShare(meeting, rank);
  plan.machineRanks = share.ranks;
  plan.oversubscribed = share.ranks > share.cpus;
  return plan;
}

}  // namespace braid::create
