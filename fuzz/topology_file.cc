// The topology text formats (topology/README.md) from a string: the topology file BRAID_TOPO_FILE
// names (parseGraph(), what loadGraph() runs on the file's text), and the one-line rank
// descriptor ranks exchange through the store (parseDescriptor()), chosen by the "braid-rank/"
// prefix. What parses must survive braid's own writer: formatGraph() then parseGraph() gives an
// equal graph, serializeDescriptor() then parseDescriptor() an equal descriptor, and a graph
// built from descriptors (buildGraph(), as every communicator does) dumps to a readable file.
// braid::Error is the refusal braid promises for a bad file; anything else is a finding.
#include <string>

#include "common/error.h"
#include "fuzz/fixture.h"
#include "topology/topology.h"

namespace topo = braid::topology;
using braid::fuzz::broken;

namespace {

constexpr int64_t kFuzzMaxRanks = 4096;

// formatGraph() must give a text parseGraph() reads back to an equal graph.
void roundTrip(const topo::ClusterGraph& g) {
  const std::string text = topo::formatGraph(g);
  topo::ClusterGraph back;
  try {
    back = topo::parseGraph(text, "formatGraph output");
  } catch (const braid::Error& e) {
    broken(std::string("formatGraph output does not parse: ") + e.what() + "\n" + text);
  }
  if (!(back == g)) broken("formatGraph/parseGraph changed the graph:\n" + text);
  (void)topo::describeGraph(g);
}

void descriptor(const std::string& line) {
  const topo::RankDescriptor d = topo::parseDescriptor(line);
  const std::string again = topo::serializeDescriptor(d);
  topo::RankDescriptor back;
  try {
    back = topo::parseDescriptor(again);
  } catch (const braid::Error& e) {
    broken(std::string("serializeDescriptor output does not parse: ") + e.what() + "\n" + again);
  }
  if (!(back == d)) broken("serializeDescriptor/parseDescriptor changed it:\n" + again);
  // Two ranks on its host, one on another.
  topo::RankDescriptor other = d;
  other.host += "/other";
  roundTrip(topo::buildGraph({d, d, other}));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string text(reinterpret_cast<const char*>(bytes), size);
  try {
    if (text.rfind("braid-rank/", 0) == 0) {
      descriptor(text);
    } else {
      // A few-byte line can describe a million ranks (the file format's bound), and a round trip
      // of that many takes longer under the sanitizers than the hang budget allows, while the
      // work is linear in the ranks: the fuzzer explores the parser with a smaller bound.
      roundTrip(topo::parseGraph(text, "fuzz", kFuzzMaxRanks));
    }
  } catch (const braid::Error&) {
  }
  return 0;
}
