// The cost model: predicted time of a collective run by one algorithm on a cluster graph.
//
// Alpha-beta per link class (topology.h LinkParams) with contention: a node's NICs are shared by
// every connection leaving it (all ring lanes crossing it, every local rank's shard ring in the
// hierarchical all-reduce), and ranks outnumbering a node's CPUs slow its shared-memory links in
// proportion; buffers that fit the last-level cache copy faster. Formulas (S bytes, n ranks, N
// nodes, L ranks per node, c chunk bytes):
//   ring    2(n-1) steps (reduce-scatter, all-gather: n-1) of S/n per lane in rounds of one chunk
//           per rank, each step as slow as the slowest edge of the ring (latency on the first
//           round, per-piece overhead on the later ones, which follow through the slots);
//   direct  one exchange: every rank sends its (n-1) messages (all-reduce: S each) in turn;
//   chain   a pipeline through n-1 hops in chunks: fill + (chunks-1) x slowest hop;
//   tree    double binary tree, reduce then broadcast pipelined in chunks: 2 x depth hops of fill
//           (log2 N over the network, log2 L inside a node) + steady chunks at ~2S per link;
//   hier    intra-node reduce-scatter, an inter-node ring all-reduce of each local rank's S/L
//           shard (L rings share each node's NICs), intra-node all-gather, pipelined: the
//           slowest phase + the fill (first chunks through the intra-node phases);
//   single copy (all-reduce, one node) three small exchanges + 2(n-1)/n S copied per rank;
//   rank order  direct exchanges: all-to-all (+ all-gather for all-reduce; reduce: a gather).
// Pure: no I/O, no communicator; the same graph gives the same numbers on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/types.hpp"
#include "topology/topology.h"

namespace braid::topology {

// The model prices braid::Collective (isScheduled ones) run with a braid::Algorithm other than
// kAuto (braid/types.hpp).

/// One way to run a collective.
struct Candidate {
  Algorithm algo = Algorithm::kRing;
  int lanes = 1;                  ///< parallel lanes (rings, chains, tree pairs, shard rings)
  size_t chunkBytes = 128 << 10;  ///< pipeline piece (the slot size for ring and direct)
};

/// What the model predicts for one candidate.
struct Prediction {
  double timeUs = 0;   ///< +infinity when the family cannot compute this collective here
  std::string detail;  ///< what bounds it, e.g. "2x7 steps x 1 round of 8 MiB, slowest net"
};

class CostModel {
 public:
  /// Validates the graph (kInvalidUsage when inconsistent) and keeps a copy.
  explicit CostModel(ClusterGraph graph);

  const ClusterGraph& graph() const { return graph_; }
  int ranks() const { return graph_.size(); }
  int nodes() const { return static_cast<int>(graph_.nodes.size()); }

  /// Predicted time of one collective of `bytes` in nccl-tests' size convention (all-reduce,
  /// broadcast, reduce: the buffer; reduce-scatter: one rank's whole input; all-gather: one
  /// rank's whole output), root 0 for the rooted ones. Thread-safe.
  Prediction predict(Collective coll, size_t bytes, const Candidate& candidate) const;

 private:
  struct NodeCost {
    LinkParams intra;     ///< the node's intra link, contention applied
    uint64_t cacheBytes;  ///< last-level cache (a default when unknown)
    double nicGbps;       ///< all its NICs together
    int localRanks;
  };
  /// Intra-node links for a collective of `bytes`: per node, and the slowest node's.
  struct Links {
    std::vector<LinkParams> intra;
    LinkParams slowest;
  };
  Links linksFor(double bytes) const;
  /// A ring (closed) or chain over `lanes` lanes in rank order from `first` (odd lanes reversed,
  /// as the schedules build them): the slowest edge's time for `bytes` per edge, with the link's
  /// latency (first piece) or its per-piece overhead (pieces behind it).
  double slowestEdgeUs(const Links& links, int lanes, int first, bool closed, double bytes,
                       bool withLatency, std::string* which) const;
  Prediction ring(const Links& links, Collective coll, double bytes, const Candidate& c) const;
  Prediction direct(const Links& links, Collective coll, double bytes, const Candidate& c) const;
  Prediction chain(const Links& links, double bytes, const Candidate& c) const;
  Prediction tree(const Links& links, double bytes, const Candidate& c) const;
  Prediction hier(const Links& links, double bytes, const Candidate& c) const;
  Prediction singleCopy(const Links& links, double bytes) const;
  Prediction pairwise(const Links& links, double bytes, const Candidate& c) const;
  Prediction rankOrder(const Links& links, Collective coll, double bytes, const Candidate& c) const;

  ClusterGraph graph_;
  std::vector<NodeCost> nodeCost_;
  double minNicGbps_ = 0;
};

}  // namespace braid::topology
