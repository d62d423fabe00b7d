// Single-copy all-reduce between the ranks of one host (Algorithm::kSingleCopy): each rank owns a
// share of the elements, reads that share of every peer's input where it lies (its own process:
// the pointer; another: transport/peer_memory.h), reduces the n inputs in rank order into its own
// output and writes the result into every peer's output. No slots, no handshake per piece: a
// peer's input is read from memory once instead of from lines a core on another die just wrote
// into a slot (bench/RESULTS.md, issue 14).
//
// Why it is safe (the communicator runs it between two exchanges under the op's header, see
// CommState::runSingleCopy): before it, every rank has entered the call and published its
// buffers' addresses, so every input is final and every output writable; after it, a rank
// returns only once every peer confirmed it finished, so no peer still reads its input or writes
// its output. While it runs, the element range of share s is read and written only by rank s:
// in every rank's input it only reads s's share, in every output it only writes it (in place,
// each block of a share is read from every input before the result goes to any output).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/engine/program_runner.h"

namespace braid::comm {

/// Where one rank's buffers are, as that rank published them.
struct PeerBuffers {
  int64_t pid = 0;
  bool sameProcess = false;  ///< ranks as threads: its addresses are ours
  uint64_t input = 0;
  uint64_t output = 0;
};

class SingleCopy {
 public:
  /// Runs this rank's part of the all-reduce of `count` elements described by `args` (dtype, op;
  /// its input and output are peers[rank]'s). Errors (a peer's memory could not be read or
  /// written) name this rank, the peer, the bytes and runner.what(args).
  void run(const ProgramRunner& runner, const ExecArgs& args, size_t count, int rank,
           const std::vector<PeerBuffers>& peers);

  /// The elements [lo, hi) of rank r's share: count split n ways at 64-byte boundaries.
  static void share(size_t count, size_t elemSize, int n, int r, size_t* lo, size_t* hi);

 private:
  std::vector<char> scratch_;  // one block per peer in another process
};

}  // namespace braid::comm
