// The piece engine of host memory: copies and reduces each piece at once with the CPU kernels
// (kernels/kernels.h), for the one engine (comm/engine/executor.h).
#pragma once

#include <atomic>
#include <vector>

#include "comm/engine/program_runner.h"

namespace braid::comm {

/// Moves a piece now; results bound for a large output are formed in cache and streamed out.
/// `deferred`: the runner drives it as it drives the device engine (one piece per lane per
/// sweep, slots posted and released only after finish()), so the host tests check that protocol
/// on machines without a GPU (BRAID_DEFERRED_PIECES=1; the memory moves at once either way).
class HostPieces final : public PieceEngine {
 public:
  explicit HostPieces(bool deferred = false) : PieceEngine(deferred) {}
  void move(const Piece& piece, const ExecArgs& args) override;

 private:
  std::vector<char> scratch_;  // one piece, for results that are streamed to the output
};

}  // namespace braid::comm
