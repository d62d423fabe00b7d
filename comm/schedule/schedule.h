// Algorithms as data: a schedule is, for each rank, lanes of ordered steps over buffer ranges.
//
// A step is one primitive on one channel to or from one peer (DESIGN.md). Executors run it
// (comm/exec), the verifier proves it (verifier.h). Nothing here names a transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/types.hpp"

namespace braid::comm {

/// The primitives. "slot" is the message received from recvPeer; "out" is the message sent to
/// sendPeer; src/dst are local buffer ranges of `count` elements.
enum class Prim : uint8_t {
  kSend,                ///< out = src
  kRecv,                ///< dst = slot
  kRecvReduce,          ///< dst = slot op src
  kRecvReduceSend,      ///< out = slot op src
  kRecvReduceCopySend,  ///< dst = slot op src; out = dst
  kRecvCopySend,        ///< dst = slot; out = slot
  kCopy,                ///< dst = src (local)
  kGatherReduce,        ///< dst = reduce over ranks 0..n-1 in rank order of (the slot from
                        ///< each peer, or src for this rank); receives from every other rank
};
const char* primName(Prim prim);
bool primReceives(Prim prim);
bool primSends(Prim prim);
bool primReads(Prim prim);   ///< reads src
bool primWrites(Prim prim);  ///< writes dst

/// Which user buffer a range lives in.
enum class Buf : uint8_t { kInput = 0, kOutput = 1 };

struct BufRange {
  Buf buf = Buf::kInput;
  size_t offset = 0;  ///< in elements
};

struct Step {
  Prim prim = Prim::kCopy;
  int recvPeer = -1;
  int sendPeer = -1;
  int channel = 0;  ///< transport channel index used for both directions of this step
  BufRange src;
  BufRange dst;
  size_t count = 0;       ///< elements
  bool finalize = false;  ///< the result is final: apply the op's finalize (avg: divide by n)
  /// A send or receive of count 0 that still moves one header-only message (other count-0 steps
  /// are skipped). allToAllv's pairs exchange one message whatever their counts, so a peer that
  /// sends nothing where this rank expects bytes (or the reverse) is a named size mismatch, not a
  /// receive that waits out the timeout.
  bool emptyMessage = false;
};

/// Steps run in order within a lane; lanes of one rank run concurrently (interleaved). No two
/// lanes of a rank may use the same (peer, channel, direction).
struct Lane {
  std::vector<Step> steps;
};

struct RankProgram {
  std::vector<Lane> lanes;
};

// What is computed is a braid::Collective (isScheduled ones) and how, a braid::Algorithm other
// than kAuto (braid/types.hpp).

/// All-to-all with per-peer splits (allToAllv): this rank's counts and displacements, in
/// elements, one entry per rank (its own included). Each rank knows only its own row.
struct PeerLayout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
};

struct ScheduleSpec {
  Collective shape = Collective::kAllReduce;
  Algorithm family = Algorithm::kRing;
  int nranks = 1;
  size_t count = 0;  ///< allreduce/broadcast/reduce: buffer elements; reduceScatter/scatter: recv
                     ///< count per rank; allGather/gather: send count per rank; allToAll:
                     ///< elements per peer; allToAll with perPeer: any non-zero value
  int root = 0;
  int lanes = 1;  ///< parallel lanes (channels) to spread the buffer over
  bool inPlace = false;
  size_t elemsPerPiece = 0;  ///< elements per message (slot capacity); 0 = unlimited. Rings
                             ///< proceed in rounds of one piece per chunk, so every rank runs at
                             ///< most one slot ahead of its neighbour (no deadlock with K >= 2)
  std::vector<int> nodeOf;   ///< node id per rank (hier groups ranks by it); empty = one node
  /// allToAll only: per-peer splits of the rank the program is built for (null: equal blocks of
  /// `count`). Programs built from it are that rank's alone (never cached by spec).
  std::shared_ptr<const PeerLayout> perPeer = nullptr;
};

/// Piece i of a step of `count` elements cut into pieces of at most `perPiece` elements.
inline size_t pieceCount(size_t count, size_t perPiece) {
  return count / perPiece + (count % perPiece != 0);
}

/// Elements in the input and output buffers of `spec` for one rank.
size_t inputCount(const ScheduleSpec& spec);
size_t outputCount(const ScheduleSpec& spec);

/// Whether `family` can compute `shape` (e.g. chain does broadcast and reduce only).
bool familySupports(Algorithm family, Collective shape);

/// Channels per peer that schedules of `family` with `lanes` lanes use (the endpoint must have at
/// least this many): tree needs two (one per tree), the others one per lane.
int channelsUsed(Algorithm family, int lanes);

/// The program of one rank. Throws braid::Error(kInvalidUsage) for an unsupported combination.
RankProgram buildProgram(const ScheduleSpec& spec, int rank);

/// Even split of `total` elements into `parts` ranges: [begin(i), begin(i+1)).
inline size_t splitBegin(size_t total, int parts, int i) {
  size_t base = total / parts, extra = total % parts;
  return base * i + (static_cast<size_t>(i) < extra ? i : extra);
}

/// Human-readable dump, for tests and BRAID_DEBUG=TRACE.
std::string describe(const RankProgram& program);

}  // namespace braid::comm
