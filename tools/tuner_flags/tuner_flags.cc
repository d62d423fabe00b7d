#include "tools/tuner_flags/tuner_flags.h"

#include <fmt/format.h>

#include "common/env.h"
#include "common/error.h"

namespace braid::tools {

void addTunerFlags(CLI::App& app, TunerFlags& flags, const std::string& topoHelp) {
  app.add_option("--topo", flags.topoFile, topoHelp);
  app.add_option("--chunk", flags.chunk,
                 "slot size, as BRAID_CHUNK (default 128K on one node, 1M on several)");
  app.add_option("--slots", flags.slots, "slots per channel, as BRAID_SLOTS (default 8)");
  app.add_option("--channels", flags.channels,
                 "channels, as BRAID_CHANNELS (default 1 on one node, 4 on several)");
  app.add_flag("--pick-chunk", flags.pickChunk,
               "also price pieces smaller than the slot for chain, tree and hier");
}

std::optional<topology::ClusterGraph> graphFromFlags(const TunerFlags& flags, std::string* origin) {
  if (!flags.topoFile.empty()) {
    *origin = "loaded from " + flags.topoFile;
    return topology::loadGraph(flags.topoFile);
  }
  if (auto g = topology::graphFromEnvironment()) {
    *origin = fmt::format("loaded from {}={}", topology::kTopoFileEnv,
                          *envString(topology::kTopoFileEnv));
    return g;
  }
  return std::nullopt;
}

comm::TunerConfig tunerConfigOf(const topology::ClusterGraph& graph, const TunerFlags& flags) {
  comm::TunerConfig config;
  config.nranks = graph.size();
  const int nodes = static_cast<int>(graph.nodes.size());
  config.slotBytes =
      flags.chunk.empty() ? comm::defaultSlotBytes(nodes) : bytesFlag("--chunk", flags.chunk);
  config.slots = flags.slots;
  config.channels = flags.channels > 0 ? flags.channels : comm::defaultChannels(nodes);
  config.pickChunk = flags.pickChunk;
  config.model = comm::makeTunerModel(graph);
  return config;
}

size_t bytesFlag(const std::string& flag, const std::string& text) {
  auto v = parseBytes(text);
  BRAID_ENFORCE(v.has_value(), ErrorCode::kInvalidUsage, "{} '{}' is not a size (e.g. 8, 64K, 1G)",
                flag, text);
  return *v;
}

std::vector<Collective> collectivesFlag(const std::string& text, bool allowAll) {
  const char* choices = allowAll ? "all, allreduce, reducescatter, allgather, broadcast, reduce, "
                                   "alltoall, gather or scatter"
                                 : "allreduce, reducescatter, allgather, broadcast, reduce, "
                                   "alltoall, gather or scatter";
  if (allowAll && text == "all") {
    return {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
            Collective::kBroadcast, Collective::kReduce,        Collective::kAllToAll,
            Collective::kGather,    Collective::kScatter};
  }
  Collective coll;
  BRAID_ENFORCE(parseCollective(text.c_str(), &coll) && isScheduled(coll), ErrorCode::kInvalidUsage,
                "--collective '{}': choose {}", text, choices);
  return {coll};
}

}  // namespace braid::tools
