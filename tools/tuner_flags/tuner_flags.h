// What braid-topo and braid-sim share: the flags that set up the tuner as a communicator would
// (slot size, slots, channels, chunk picking), the graph they price (--topo, else
// BRAID_TOPO_FILE, else a default the tool names), sizes and collective names from flags.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "braid/types.hpp"
#include "comm/detail/transports.h"  // braid-topo shows them beside the decisions
#include "comm/detail/tuner.h"
#include "topology/topology.h"

namespace braid::tools {

struct TunerFlags {
  std::string topoFile;
  std::string chunk;  ///< "" = the communicator's default for the topology
  int slots = 8;
  int channels = 0;  ///< 0 = the communicator's default for the topology
  bool pickChunk = false;
};

/// --topo, --chunk, --slots, --channels, --pick-chunk; `topoHelp` says what happens without --topo.
void addTunerFlags(CLI::App& app, TunerFlags& flags, const std::string& topoHelp);

/// The graph from --topo, else BRAID_TOPO_FILE, else nullopt (the tool picks its default).
/// `origin` says where it came from.
std::optional<topology::ClusterGraph> graphFromFlags(const TunerFlags& flags, std::string* origin);

/// The tuner a communicator on `graph` would have, with the flags' overrides.
comm::TunerConfig tunerConfigOf(const topology::ClusterGraph& graph, const TunerFlags& flags);

/// A size flag ("8", "64K", "1G"); kInvalidUsage naming the flag otherwise.
size_t bytesFlag(const std::string& flag, const std::string& text);

/// "allreduce" .. "reduce" (and nccl-tests' "all_reduce" spellings), or with `allowAll` "all"
/// for every scheduled collective; kInvalidUsage naming --collective otherwise.
std::vector<Collective> collectivesFlag(const std::string& text, bool allowAll);

}  // namespace braid::tools
