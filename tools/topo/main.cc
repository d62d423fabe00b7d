// braid-topo: what topology braid sees (discovered here, or loaded from a file) and what the tuner
// would choose on it, size by size, with the predicted times.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "common/error.h"
#include "tools/tuner_flags/tuner_flags.h"

namespace {

using braid::Collective;

struct Flags {
  braid::tools::TunerFlags tuner;
  int ranks = 0;
  std::string minBytes = "8", maxBytes = "1G";
  double factor = 2;
  std::string collective = "all";
  std::string dumpFile;
  std::string explainSize;
};

// The graph: --topo, else BRAID_TOPO_FILE, else this host discovered with `ranks` ranks on it.
braid::topology::ClusterGraph graphOf(const Flags& f, std::string* origin) {
  if (auto g = braid::tools::graphFromFlags(f.tuner, origin)) return *g;
  braid::topology::RankDescriptor self = braid::topology::localDescriptor();
  int ranks = f.ranks > 0 ? f.ranks : std::max(2, self.pus);
  *origin = fmt::format("discovered on this host ({}), assuming {} rank(s) on it",
                        self.fromHwloc ? "hwloc" : "without hwloc: /sys only", ranks);
  return braid::topology::buildGraph(std::vector<braid::topology::RankDescriptor>(ranks, self));
}

std::string sizeText(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

// The tuner's input for a row of nccl-tests size `size`.
size_t inputBytesOf(Collective shape, size_t size, int n) {
  return shape == Collective::kAllGather ? size / n : size;
}

int run(const Flags& f) {
  std::string origin;
  braid::topology::ClusterGraph graph = graphOf(f, &origin);
  if (f.ranks > 0 && f.ranks != graph.size() && !f.tuner.topoFile.empty()) {
    braid::fail(braid::ErrorCode::kInvalidUsage, "--ranks {} disagrees with {} ({} ranks)", f.ranks,
                f.tuner.topoFile, graph.size());
  }
  if (!f.dumpFile.empty()) braid::topology::saveGraph(graph, f.dumpFile);
  const braid::comm::TunerConfig config = braid::tools::tunerConfigOf(graph, f.tuner);
  fmt::print("# braid-topo: {}\n", origin);
  fmt::print("{}", braid::topology::describeGraph(graph));
  // What carries the bytes: each transport, whether it is here, whether it is picked by itself.
  fmt::print("\n# transports (best first; BRAID_TRANSPORT forces one)\n");
  std::string transports = braid::comm::describeTransports();
  for (size_t start = 0, end; start < transports.size(); start = end + 1) {
    end = transports.find('\n', start);
    if (end == std::string::npos) end = transports.size();
    fmt::print("#   {}\n", transports.substr(start, end - start));
  }
  const std::vector<Collective> shapes = braid::tools::collectivesFlag(f.collective, true);
  if (!f.explainSize.empty()) {
    for (Collective s : shapes) {
      size_t size = braid::tools::bytesFlag("--explain", f.explainSize);
      fmt::print("\n{}", braid::comm::explain(config, s, inputBytesOf(s, size, config.nranks)));
    }
    return 0;
  }
  const size_t lo = braid::tools::bytesFlag("-b", f.minBytes),
               hi = braid::tools::bytesFlag("-e", f.maxBytes);
  BRAID_ENFORCE(lo >= 1 && lo <= hi && f.factor > 1, braid::ErrorCode::kInvalidUsage,
                "sizes: need 1 <= -b <= -e and -f > 1 (got {} .. {}, factor {})", lo, hi, f.factor);
  fmt::print("\n# decisions (slot {} x {} slots, {} channel(s)); size as nccl-tests counts it\n",
             sizeText(config.slotBytes), config.slots, config.channels);
  for (Collective s : shapes) {
    fmt::print("\n# {}\n# {:>10}  {:>8}  {:>5}  {:>6}  {:>14}  {:>9}  {:>14}\n", collectiveName(s),
               "size", "algo", "lanes", "chunk", "predicted(us)", "runner-up", "runner-up(us)");
    for (double size = static_cast<double>(lo); size <= static_cast<double>(hi) + 0.5;
         size *= f.factor) {
      const size_t bytes = static_cast<size_t>(std::llround(size));
      auto reports = braid::comm::rankCandidates(config, s, inputBytesOf(s, bytes, config.nranks));
      const braid::comm::CandidateReport* chosen = nullptr;
      const braid::comm::CandidateReport* second = nullptr;
      for (const auto& r : reports) {
        if (r.chosen) {
          chosen = &r;
        } else if (!second && r.excluded.empty()) {
          second = &r;
        }
      }
      fmt::print("  {:>10}  {:>8}  {:>5}  {:>6}  {:>14.2f}  {:>9}  {:>14}\n", bytes,
                 braid::algorithmName(chosen->family), chosen->lanes, sizeText(chosen->chunkBytes),
                 chosen->predictedUs, second ? braid::algorithmName(second->family) : "-",
                 second ? fmt::format("{:.2f}", second->predictedUs) : "-");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "braid-topo: the topology braid discovers (or loads) and the algorithm the tuner picks per "
      "collective and size, with predicted times"};
  Flags f;
  braid::tools::addTunerFlags(app, f.tuner,
                              "topology file to load (default: BRAID_TOPO_FILE, else discover "
                              "this host)");
  app.add_option("-n,--ranks", f.ranks, "ranks on this host when discovering (default: its CPUs)");
  app.add_option("-b,--minbytes", f.minBytes, "smallest size (default 8)");
  app.add_option("-e,--maxbytes", f.maxBytes, "largest size (default 1G)");
  app.add_option("-f,--stepfactor", f.factor, "size factor between rows (default 2)");
  app.add_option("--collective", f.collective,
                 "all, allreduce, reducescatter, allgather, broadcast or reduce");
  app.add_option("--dump", f.dumpFile, "write the graph to this topology file");
  app.add_option("--explain", f.explainSize,
                 "explain the decision at this one size instead of printing the table");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(f);
  } catch (const braid::Error& e) {
    fmt::print(stderr, "braid-topo: {}\n", e.what());
    return 1;
  }
}
