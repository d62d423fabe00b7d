// Runs one rank's program on host memory over a transport endpoint: interleaves the lanes, moves
// one slot-sized piece per primitive, spins briefly then sleeps on the endpoint's doorbell, and
// ends every wait with an error naming rank, peer, collective and size.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "comm/exec/header.h"
#include "comm/schedule/schedule.h"
#include "transport/transport.h"

namespace braid::comm {

/// Everything one run needs besides the program.
struct ExecArgs {
  const void* input = nullptr;
  void* output = nullptr;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  OpHeader header;             ///< expected in every received message, sent in every message
  size_t elemsPerPiece = 1;    ///< slot payload in elements (the program was built for it)
  double timeoutSeconds = 60;  ///< no progress for this long -> kTimeout
  bool streamOutput = false;   ///< write the output with streaming stores (large buffers)
  Collective called = Collective::kAllReduce;  ///< what the user called (recv's header says send)
  /// Point-to-point runs: collectives issued before this op (probes numbered below are stale).
  uint64_t collectivesBefore = 0;
};

class HostExecutor {
 public:
  /// `oversubscribed`: ranks on this host outnumber the cores they may run on (then waits yield
  /// the core at once instead of spinning).
  HostExecutor(transport::Endpoint& endpoint, const std::atomic<bool>& aborted,
               bool oversubscribed);

  /// Runs `program` to completion. Throws braid::Error (kTimeout, kRemoteError, kMismatch,
  /// kAborted) naming this rank, the peer, and args.what.
  void run(const RankProgram& program, const ExecArgs& args);

 private:
  struct Cursor {
    const Lane* lane = nullptr;
    size_t step = 0;
    size_t piece = 0;
  };
  bool tryPiece(Cursor& cursor, const ExecArgs& args);
  /// The oldest data message from peer on channel (as tryPeek), dropping probes before it: a
  /// stale one, or this op's when it agrees. Null when none, or when a later op's probe is first.
  const void* peekData(int peer, int channel, size_t* bytes, transport::MessageMeta* meta,
                       const ExecArgs& args);
  /// Handles the probe `meta` at the head of (peer, channel): releases it and returns true, or
  /// returns false leaving it (a later op's, or this run is point-to-point); a probe of this op
  /// that describes another call fails with kMismatch.
  bool dropProbe(int peer, int channel, const transport::MessageMeta& meta, const ExecArgs& args);
  /// Sends one probe to every peer an unfinished lane waits to receive from (slow path, once a
  /// run; only when a slot is free).
  void sendProbes(const ExecArgs& args);
  void checkHeader(const transport::MessageMeta& meta, size_t bytes, size_t expectBytes, int peer,
                   const ExecArgs& args);
  /// Fails with kMismatch when a peer's message numbered like this op describes another call
  /// (a rank that disagrees may never send what this rank waits for: two broadcast "roots" only
  /// send). Looks at the head of every channel, dropping only probes.
  void checkArrivals(const ExecArgs& args);
  /// Runs every unfinished lane as far as it goes now; true when any piece moved.
  bool advanceAll(const ExecArgs& args, size_t* unfinished);
  /// Fails on an abort (this process's or a peer's), on a mismatch seen in arrivals and, with
  /// checkPeers, on a gone peer that the current steps still wait on.
  void slowPathChecks(const ExecArgs& args, bool checkPeers);
  /// The first peer that is gone while a current step still needs it (its message is missing, or
  /// no slot to it is free), or -1. A peer that left after posting what is needed is not one.
  int goneAwaitedPeer(const ExecArgs& args);
  [[noreturn]] void failWaiting(ErrorCode code, const std::vector<Cursor>& cursors,
                                const ExecArgs& args, const std::string& why);
  char* address(Buf buf, size_t elemOffset, const ExecArgs& args) const;
  /// "allreduce #3 (1024 x float, sum, ring, 131072-byte pieces) of 4096 bytes", for errors.
  std::string what(const ExecArgs& args) const;

  transport::Endpoint& ep_;
  const std::atomic<bool>& aborted_;
  int rank_;
  int size_;
  size_t elemSize_ = 0;
  transport::MessageMeta expectedMeta_;  // args.header encoded: sent with, and expected in, each
                                         // message of this run
  bool oversubscribed_ = false;
  int spinRounds_ = 0;
  bool probed_ = false;  // this run sent its probes
  std::vector<Cursor> cursors_;
  std::vector<const void*> gatherSrcs_;
  std::vector<char> scratch_;  // one piece, for results that are streamed to the output
};

}  // namespace braid::comm
