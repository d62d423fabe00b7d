// Creating a communicator, in three steps with one file each (comm/create/):
//   rendezvous: the ranks meet in the store: rank 0's job id, the job secret check, and what
//               each rank publishes about itself (host, CPUs, hardware);
//   plan:       from that, alike on every rank: nodes, the transport per peer, slot and lane
//               sizes, the tuner's cluster model;
//   connect:    the transport endpoint and the executor, then the store is let go.
// The entry points (fromStore, fromEnvironment, fromUniqueId) are in comm/init.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/detail/state.h"
#include "topology/topology.h"
#include "transport/transport.h"

namespace braid::create {

/// Where and as whom a rank joins: what the entry point knows besides the state.
struct Joining {
  std::string prefix;            ///< of every store key (Options::storePrefix)
  std::string secret;            ///< the job secret
  std::string advertiseAddress;  ///< where other hosts reach this rank
};

/// What the ranks published at the rendezvous, indexed by rank.
struct Meeting {
  std::string jobId;  ///< names shm segments and transport keys
  std::vector<std::string> hosts;
  std::vector<topology::RankDescriptor> descriptors;
};

/// Meets the other ranks in state.store. Throws naming the peer that did not publish in time,
/// or whose job secret differs (kInvalidUsage, on every rank).
Meeting rendezvous(const CommState& state, const Joining& joining);

/// How this rank connects, besides what plan() writes into the state.
struct Plan {
  transport::EndpointConfig config;
  int nodes = 1;
  int localRanks = 1;           ///< ranks sharing memory with this one (itself included)
  int machineRanks = 1;         ///< ranks on this machine (kernel), whatever host they pose as
  bool oversubscribed = false;  ///< the machine's ranks outnumber their CPUs: waits yield
};

/// The ranks on `rank`'s machine and how many CPUs they may run on together. More ranks than
/// CPUs (mpirun binding one rank per core is not; 4 unbound ranks on 2 cores are) makes waits
/// yield: comm/engine/program_runner.cc.
struct MachineShare {
  int ranks = 1;
  int cpus = 1;
};
MachineShare machineShare(const Meeting& meeting, int rank);

/// Sets state.nodeOf, the multi-node slot and lane defaults and state.tunerModel.
Plan plan(CommState& state, const Meeting& meeting, const Joining& joining);

/// Whether the ranks may run the single-copy all-reduce (comm/create/peer_memory.cc): sets
/// state.singleCopy and singleCopyPeers, or state.singleCopyWhy. Alike on every rank.
void testPeerMemory(CommState& state, const Plan& plan, transport::KeyValue& kv);

/// Connects the endpoint, makes the executor and lets go of the store.
void connect(CommState& state, const Meeting& meeting, const Plan& plan);

}  // namespace braid::create
