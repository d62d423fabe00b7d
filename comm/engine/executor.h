// The executor of one communicator, host or device alike: the engine (program_runner.h) over the
// communicator's endpoint with the piece engine of its memory (comm/exec/host_pieces.h for host
// buffers, comm/device/cuda_pieces.h for device buffers). It owns both, so a communicator holds
// one thing that runs its programs whatever memory they move.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "comm/engine/program_runner.h"

namespace braid::comm {

class Executor {
 public:
  /// `oversubscribed`: ranks on this host outnumber the cores they may run on (then waits yield
  /// the core at once instead of spinning). `endpoint` and `aborted` outlive the executor.
  Executor(transport::Endpoint& endpoint, const std::atomic<bool>& aborted, bool oversubscribed,
           std::unique_ptr<PieceEngine> pieces)
      : pieces_(std::move(pieces)), runner_(endpoint, aborted, oversubscribed, *pieces_) {}

  /// Runs `program` to completion. Throws braid::Error (kTimeout, kRemoteError, kMismatch,
  /// kAborted, and what the piece engine throws) naming this rank, the peer, and the op.
  void run(const RankProgram& program, const ExecArgs& args) { runner_.run(program, args); }
  /// Runs point-to-point ops together (ProgramRunner::runGroup).
  bool runGroup(const std::vector<LaneRun>& lanes, LaneFeed& feed) {
    return runner_.runGroup(lanes, feed);
  }
  bool resumeGroup(LaneFeed& feed) { return runner_.resumeGroup(feed); }
  const ProgramRunner& runner() const { return runner_; }
  ProgramRunner& runner() { return runner_; }

 private:
  std::unique_ptr<PieceEngine> pieces_;  // before runner_, which holds a reference to it
  ProgramRunner runner_;
};

}  // namespace braid::comm
