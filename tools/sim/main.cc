// braid-sim: the table all_reduce_perf (and the other *_perf binaries) would print, predicted by
// the cost model for any topology file, without running a rank.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "bench/format/colls.h"
#include "bench/format/table.h"
#include "braid/types.hpp"
#include "common/error.h"
#include "tools/tuner_flags/tuner_flags.h"

namespace {

using braid::Collective;
using braid::ErrorCode;

struct Flags {
  braid::tools::TunerFlags tuner;
  std::string collective = "allreduce";
  std::string minBytes = "32M", maxBytes = "32M";
  std::string stepBytes = "1M";
  double factor = 0;
  int ranks = 0;
  std::string type = "float", op = "sum";
  int root = 0;
  std::string algo = "auto";
  bool showAlgo = false;
};

// The first `ranks` ranks of `g` (nodes left without ranks dropped).
braid::topology::ClusterGraph firstRanks(const braid::topology::ClusterGraph& g, int ranks) {
  if (ranks <= 0 || ranks == g.size()) return g;
  BRAID_ENFORCE(ranks < g.size(), ErrorCode::kInvalidUsage,
                "-g {} asks for more ranks than the topology has ({})", ranks, g.size());
  braid::topology::ClusterGraph out = g;
  out.nodes.clear();
  out.ranks.assign(ranks, {});
  for (const braid::topology::Node& node : g.nodes) {
    braid::topology::Node kept = node;
    kept.ranks.clear();
    for (int r : node.ranks) {
      if (r < ranks) kept.ranks.push_back(r);
    }
    if (kept.ranks.empty()) continue;
    for (size_t i = 0; i < kept.ranks.size(); ++i) {
      braid::topology::RankInfo info = g.ranks[kept.ranks[i]];
      info.node = static_cast<int>(out.nodes.size());
      info.local = static_cast<int>(i);
      out.ranks[kept.ranks[i]] = info;
    }
    out.nodes.push_back(std::move(kept));
  }
  out.validate();
  return out;
}

int run(const Flags& f) {
  std::string origin;
  braid::topology::ClusterGraph graph;
  if (auto g = braid::tools::graphFromFlags(f.tuner, &origin)) {
    graph = *g;
  } else {
    graph = braid::topology::uniformGraph(1, f.ranks > 0 ? f.ranks : 2);
    origin = "one node of shared-memory ranks (no --topo)";
  }
  graph = firstRanks(graph, f.ranks);
  const int n = graph.size();
  const Collective coll = braid::tools::collectivesFlag(f.collective, false).front();
  const braid::bench::CollInfo& info = braid::bench::collInfo(coll);
  braid::DataType type;
  braid::RedOp op;
  BRAID_ENFORCE(braid::parseDataType(f.type.c_str(), &type), ErrorCode::kInvalidUsage,
                "-d '{}' is not a data type", f.type);
  BRAID_ENFORCE(braid::parseRedOp(f.op.c_str(), &op), ErrorCode::kInvalidUsage,
                "-o '{}' is not a reduction op", f.op);
  braid::Algorithm forced = braid::Algorithm::kAuto;
  BRAID_ENFORCE(braid::parseAlgorithm(f.algo, &forced), ErrorCode::kInvalidUsage,
                "--algo '{}': choose auto, ring, oneshot, chain, tree, hier or singlecopy", f.algo);
  BRAID_ENFORCE(!info.hasRoot || (f.root >= 0 && f.root < n), ErrorCode::kInvalidUsage,
                "-r {} is not a rank of this {}-rank topology", f.root, n);

  braid::comm::TunerConfig config = braid::tools::tunerConfigOf(graph, f.tuner);
  config.forced = forced;

  const size_t lo = braid::tools::bytesFlag("-b", f.minBytes),
               hi = braid::tools::bytesFlag("-e", f.maxBytes);
  const size_t step = braid::tools::bytesFlag("-i", f.stepBytes);
  const bool byFactor = f.factor > 0;
  BRAID_ENFORCE(lo >= 1 && lo <= hi && (byFactor ? f.factor > 1 : step > 0),
                ErrorCode::kInvalidUsage,
                "sizes: need 1 <= -b <= -e and -f > 1 or -i > 0 (got {} .. {})", lo, hi);
  const size_t elem = braid::dataTypeSize(type);

  std::string text =
      braid::bench::formatParamsLine(lo, hi, step, byFactor ? f.factor : 0, 0, 0, 0, false);
  text += fmt::format(
      "#\n# braid-sim {}: {} ranks on {} node(s), topology {}, algo {}, chunk {} x {} slots, {} "
      "channel(s): times predicted by the cost model, no ranks run\n#\n",
      info.name, n, graph.nodes.size(), origin, f.algo, config.slotBytes, config.slots,
      config.channels);
  text += braid::bench::formatHeader(false);
  std::fputs(text.c_str(), stdout);
  double busSum = 0;
  int rows = 0;
  for (double size = static_cast<double>(lo); size <= static_cast<double>(hi) + 0.5;
       size = byFactor ? size * f.factor : size + static_cast<double>(step)) {
    braid::bench::Counts counts = info.counts(static_cast<size_t>(std::llround(size)), elem, n);
    if (counts.paramCount == 0) continue;
    // What the communicator hands the tuner: its input bytes.
    const size_t input = counts.sendCount * elem;
    braid::comm::Choice choice = braid::comm::choose(config, coll, input);
    BRAID_ENFORCE(choice.predictedUs > 0, ErrorCode::kInvalidUsage,
                  "the cost model cannot price {} on this topology", f.algo);
    braid::bench::Row row;
    row.bytes = counts.bytes;
    row.count = counts.paramCount;
    row.type = braid::dataTypeName(type);
    row.op = info.hasOp ? braid::redOpName(op) : "none";
    row.root = info.hasRoot ? f.root : -1;
    braid::bench::Measurement m;
    m.timeUs = choice.predictedUs;
    m.algBw = static_cast<double>(counts.bytes) / (choice.predictedUs * 1e3);
    m.busBw = m.algBw * info.busFactor(n);
    m.checked = false;
    row.outOfPlace = row.inPlace = m;
    std::string line = braid::bench::formatRow(row);
    if (f.showAlgo) {
      line.pop_back();
      line += fmt::format("  {} x{} {}K\n", braid::algorithmName(choice.family), choice.lanes,
                          choice.chunkBytes >> 10);
    }
    std::fputs(line.c_str(), stdout);
    busSum += m.busBw;
    ++rows;
  }
  std::fputs(braid::bench::formatFooter(0, rows ? busSum / rows : 0).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "braid-sim: the nccl-tests table a collective would print on a topology, predicted by "
      "braid's cost model (no ranks run)"};
  Flags f;
  braid::tools::addTunerFlags(app, f.tuner,
                              "topology file (default: BRAID_TOPO_FILE, else one node)");
  app.add_option("--collective", f.collective,
                 "allreduce, reducescatter, allgather, broadcast or reduce (default allreduce)");
  app.add_option("-b,--minbytes", f.minBytes, "smallest size (default 32M)");
  app.add_option("-e,--maxbytes", f.maxBytes, "largest size (default 32M)");
  app.add_option("-i,--stepbytes", f.stepBytes, "size increment (default 1M)");
  app.add_option("-f,--stepfactor", f.factor, "size factor (overrides -i)");
  app.add_option("-g,--ranks", f.ranks,
                 "ranks: the first N of the topology (default all; without --topo: N on one node)");
  app.add_option("-d,--datatype", f.type, "data type (default float)");
  app.add_option("-o,--op", f.op, "reduction op (default sum)");
  app.add_option("-r,--root", f.root, "root of broadcast/reduce (default 0)");
  app.add_option("--algo", f.algo, "auto, ring, oneshot, chain, tree or hier (default auto)");
  app.add_flag("--show-algo", f.showAlgo, "append the chosen algorithm, lanes and chunk per row");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(f);
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "braid-sim: %s\n", e.what());
    return 1;
  }
}
