// Runs one rank's program on host memory: the engine (comm/engine/program_runner.h) with a piece
// engine that copies and reduces each piece at once, with the CPU kernels (kernels/kernels.h).
#pragma once

#include <atomic>
#include <vector>

#include "comm/engine/program_runner.h"

namespace braid::comm {

/// Moves a piece now; results bound for a large output are formed in cache and streamed out.
class HostPieces final : public PieceEngine {
 public:
  HostPieces() : PieceEngine(false) {}
  void move(const Piece& piece, const ExecArgs& args) override;

 private:
  std::vector<char> scratch_;  // one piece, for results that are streamed to the output
};

class HostExecutor {
 public:
  /// `oversubscribed`: ranks on this host outnumber the cores they may run on (then waits yield
  /// the core at once instead of spinning).
  HostExecutor(transport::Endpoint& endpoint, const std::atomic<bool>& aborted, bool oversubscribed)
      : runner_(endpoint, aborted, oversubscribed, pieces_) {}

  /// Runs `program` to completion. Throws braid::Error (kTimeout, kRemoteError, kMismatch,
  /// kAborted) naming this rank, the peer, and the op.
  void run(const RankProgram& program, const ExecArgs& args) { runner_.run(program, args); }
  /// Runs point-to-point ops together (ProgramRunner::runGroup).
  bool runGroup(const std::vector<LaneRun>& lanes, LaneFeed& feed) {
    return runner_.runGroup(lanes, feed);
  }
  bool resumeGroup(LaneFeed& feed) { return runner_.resumeGroup(feed); }

 private:
  HostPieces pieces_;  // before runner_, which holds a reference to it
  ProgramRunner runner_;
};

}  // namespace braid::comm
