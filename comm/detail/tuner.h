// Algorithm choice: which schedule family runs a collective of a given size, with how many lanes
// and what chunk, priced by the cost model (topology/cost_model.h) on the communicator's graph.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "comm/schedule/schedule.h"
#include "topology/cost_model.h"

namespace braid::comm {

/// The cost model of one communicator's cluster graph plus its decision cache. Build one per
/// communicator (after the graph exchange) and share it through TunerConfig::model. Thread-safe.
class TunerModel {
 public:
  explicit TunerModel(topology::ClusterGraph graph);
  ~TunerModel();
  const topology::CostModel& cost() const { return cost_; }
  const topology::ClusterGraph& graph() const { return cost_.graph(); }

  struct Cache;  // decisions by (shape, bytes, knobs); which size classes were logged

 private:
  topology::CostModel cost_;
  std::unique_ptr<Cache> cache_;
  friend Cache& cacheOf(const TunerModel& model);
};

/// A model for `graph`, shared.
std::shared_ptr<const TunerModel> makeTunerModel(topology::ClusterGraph graph);

/// Slot size and lanes of a communicator over `nodes` hosts unless BRAID_CHUNK / BRAID_CHANNELS
/// (or Options) say otherwise: 128 KiB x 1 on one host; 1 MiB x 4 across hosts, where each
/// message costs a network round through a transport's progress thread, so fewer, larger messages
/// on more lanes keep the link busy (bench/RESULTS.md, the namespace cluster).
inline size_t defaultSlotBytes(int nodes) { return nodes > 1 ? size_t{1} << 20 : 128 << 10; }
inline int defaultChannels(int nodes) { return nodes > 1 ? 4 : 1; }

struct TunerConfig {
  int nranks = 1;
  size_t slotBytes = 128 << 10;
  int slots = 8;
  int channels = 1;                     ///< lanes available to rings and chains
  Algorithm forced = Algorithm::kAuto;  ///< BRAID_ALGO / Options::algorithm
  /// This communicator's model (graph from discovery or BRAID_TOPO_FILE). Null, or a graph of
  /// another size than nranks: one node of nranks shared-memory ranks (today's assumption).
  std::shared_ptr<const TunerModel> model;
  /// Also price pieces smaller than the slot (slot/2, slot/4) for chain, tree and hier; the op
  /// then runs in the chosen pieces (comm/op_plan.cc). BRAID_PICK_CHUNK=1.
  bool pickChunk = false;
  /// Single copy (all-reduce on one host): every rank may read every other's memory (tested at
  /// init, comm/create/peer_memory.cc); else why not. Chosen by auto from singleCopyMinBytes
  /// (BRAID_SINGLE_COPY_BYTES) up.
  bool singleCopy = false;
  const std::string* singleCopyWhy = nullptr;  ///< owned by the communicator; null: not tested
  size_t singleCopyMinBytes = SIZE_MAX;  ///< never by default (BRAID_SINGLE_COPY_BYTES)
  /// BRAID_DETERMINISTIC: reductions in rank order only (oneshot while small, single copy where
  /// chosen, else rank order), so every algorithm gives the same bits.
  bool deterministic = false;
  /// Which families the schedules can build; null = comm::familySupports (tests override it).
  bool (*supports)(Algorithm family, Collective shape) = nullptr;
};

struct Choice {
  Algorithm family = Algorithm::kRing;
  int lanes = 1;
  size_t chunkBytes = 0;   ///< piece size the prediction assumed (the slot size unless pickChunk)
  double predictedUs = 0;  ///< the cost model's time for it (0 when not priced)
};

/// Bytes one rank sends to one peer in a direct schedule of `shape` with input `inputBytes`.
size_t directBytesPerPeer(Collective shape, size_t inputBytes, int nranks);

/// Picks the schedule for `shape` with `inputBytes` per rank: the cheapest candidate (family,
/// lanes, chunk) that can run, where oneshot needs bytes per peer <= slots x slot bytes, chain
/// only broadcast/reduce, tree/hier only what familySupports() allows, hier more than one node
/// with more than one rank on some node. On a single node of shared-memory ranks today's rule
/// (oneshot up to 32 KiB per peer, then ring or chain; single copy for all-reduce from
/// singleCopyMinBytes where the ranks may read each other's memory) stands unless the model predicts another
/// candidate at least 1.5x faster. A forced algorithm that cannot run this collective throws
/// kInvalidUsage saying why, never silently falls back. Equal inputs give equal choices on every
/// rank. With BRAID_DEBUG=INFO each decision is logged once per (collective, power-of-two size).
Choice choose(const TunerConfig& config, Collective shape, size_t inputBytes);

/// One candidate as the tuner saw it.
struct CandidateReport {
  Algorithm family = Algorithm::kRing;
  int lanes = 1;
  size_t chunkBytes = 0;
  double predictedUs = 0;  ///< +infinity when excluded
  std::string excluded;    ///< why it cannot run ("" when it can)
  std::string detail;      ///< what bounds its time (cost model)
  bool chosen = false;
};

/// Every family with its best lanes/chunk (or the reason it is excluded), cheapest first, the
/// chosen one marked. Forced algorithms report the forced one only.
std::vector<CandidateReport> rankCandidates(const TunerConfig& config, Collective shape,
                                            size_t inputBytes);

/// The decision as text: the winner with its predicted time, then each loser with its time or
/// why it was excluded (what BRAID_DEBUG=INFO logs and braid-topo prints).
std::string explain(const TunerConfig& config, Collective shape, size_t inputBytes);

/// nccl-tests' size of a collective with `inputBytes` per rank (what the cost model prices).
size_t modelBytes(Collective shape, size_t inputBytes, int nranks);

}  // namespace braid::comm
