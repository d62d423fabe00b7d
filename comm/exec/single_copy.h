// Single-copy all-reduce between the ranks of one host (Algorithm::kSingleCopy): each rank owns a
// share of the elements, reads that share of every peer's input where it lies (its own process:
// the pointer; another: transport/peer_memory.h), reduces the n inputs in rank order into its own
// output; then reads every other share from its owner's output. No slots, no handshake per
// piece: a peer's input is read from memory once instead of from lines a core on another die
// just wrote into a slot (bench/RESULTS.md, issue 14).
//
// The mapped form (reduceToAll), where every rank's input and output are braid::memAlloc buffers
// (transport/shared_buffer.h) mapped into every rank: each rank reduces its share of every input
// and writes it into every rank's output at once, one pass; no second phase. Writing into a
// peer is safe there: a peer that aborted and freed its buffer leaves this rank's mapping of
// the pages alive, so the store lands in memory nobody else uses.
//
// Otherwise only reads cross processes, never writes: a peer that aborted and returned early may free
// its buffers; reading them can only fail this rank's own call (which fails anyway: the peer's
// abort reaches it), never corrupt the peer's memory.
//
// Why it is correct (CommState::runSingleCopy runs the phases between exchanges under the op's
// header): before reduceShare, every rank has entered the call and published its buffers'
// addresses, so every input is final. Between the phases every rank confirms to every other
// that its share is reduced, so gatherShares reads final shares, and no peer still reads this
// rank's input when gatherShares overwrites it in place (the peers read only their own share of
// it, in reduceShare). After gatherShares the completion exchange keeps every rank in the call
// until no peer still reads its output. The mapped form: the address exchange, then every rank
// agrees that every peer's buffers are mapped (else all take the other path); reduceToAll reads
// only its own share of the inputs and writes only its own share of the outputs, so shares never
// race, in place too; the completion exchange keeps every rank in the call until every share
// has been written into its output and no peer reads its input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>

#include "comm/engine/program_runner.h"
#include "comm/exec/buffer_lease.h"

namespace braid::comm {

/// Where one rank's buffers are, as that rank published them.
struct PeerBuffers {
  int64_t pid = 0;
  bool sameProcess = false;  ///< ranks as threads: its addresses are ours
  uint64_t token = 0;         ///< its process's processToken() (transport/peer_memory.h)
  uint64_t input = 0;
  uint64_t output = 0;
  /// This process's addresses of its input and output for the mapped form (its own pointers
  /// for this rank), else null.
  const char* mappedInput = nullptr;
  char* mappedOutput = nullptr;
  /// A rank of this process (sameProcess, not this rank): its lease (buffer_lease.h), borrowed
  /// for each phase that touches its buffers, and the epoch it published with this op's.
  std::shared_ptr<BufferLease> lease;
  uint64_t epoch = 0;
};

class SingleCopy {
 public:
  /// Phase 1: reduces this rank's share of the all-reduce of `count` elements described by `args`
  /// (dtype, op) over every rank's input in rank order into its own output (peers[rank]'s).
  void reduceShare(const ProgramRunner& runner, const ExecArgs& args, size_t count, int rank,
                   const std::vector<PeerBuffers>& peers);
  /// Phase 2: copies every other rank's share from its output into this rank's output.
  void gatherShares(const ProgramRunner& runner, const ExecArgs& args, size_t count, int rank,
                    const std::vector<PeerBuffers>& peers);

  /// The mapped form: reduces this rank's share over every rank's mappedInput in rank order and
  /// writes it into every rank's mappedOutput.
  void reduceToAll(const ProgramRunner& runner, const ExecArgs& args, size_t count, int rank,
                   const std::vector<PeerBuffers>& peers);

  /// Ranks that are all threads of one process (every peer's mappedInput is its input), one pass
  /// each, reading peers' inputs only. All-gather: every rank's input (`count` elements) into
  /// its block of this rank's output.
  void allGatherFrom(const ProgramRunner& runner, const ExecArgs& args, size_t count, int rank,
                     const std::vector<PeerBuffers>& peers);
  /// Reduce-scatter: this rank's block (`count` elements) of every input, reduced in rank order,
  /// into its output.
  void reduceScatterFrom(const ProgramRunner& runner, const ExecArgs& args, size_t count,
                         int rank, const std::vector<PeerBuffers>& peers);
  /// Broadcast: the root's input (`count` elements) into this rank's output.
  void broadcastFrom(const ProgramRunner& runner, const ExecArgs& args, size_t count, int root,
                     int rank, const std::vector<PeerBuffers>& peers);

  /// The elements [lo, hi) of rank r's share: count split n ways at 64-byte boundaries.
  static void share(size_t count, size_t elemSize, int n, int r, size_t* lo, size_t* hi);

 private:
  /// share() of `rank`, and the elements of a pass of about `blockBytes` (whole lines); false
  /// when the share is empty.
  static bool rankShare(size_t count, size_t elem, int n, int rank, size_t blockBytes,
                        size_t* lo, size_t* hi, size_t* blockElems);

  std::vector<char> scratch_;  // one block per peer in another process
};

}  // namespace braid::comm
