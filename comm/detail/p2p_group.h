// Point-to-point ops posted together progress together. When the op at the front of a
// communicator's queue is a send or recv, the executor takes it and every send/recv queued right
// behind it as one group, runs each as a lane of its own (ProgramRunner::runGroup), and lets the
// sends and recvs the user posts while the group runs (the next isend/irecv before any wait) join
// it. So `isend(64 MiB); irecv(64 MiB); wait; wait` on two ranks, and batch_isend_irecv's
// irecv-before-isend, complete instead of each rank waiting in a send its peer reads only later.
//
// Why this is correct:
// - Issue order is kept. The group only ever takes ops from the queue's front, under queueMutex,
//   and stops at the first op that is not point-to-point: ops leave the queue in issue order,
//   which is their numbering order, and a collective behind the group starts only after the
//   group's last op finished (collectives keep their order relative to everything).
// - Sends and recvs match as they are numbered. Per (peer, direction) the runner starts a lane
//   only after the one admitted before it finished (admission order is issue order, so sequence
//   order). The peer numbers its ops the same way, and one channel's FIFO carries them, so this
//   rank's n-th recv from a peer reads exactly the peer's n-th send to it; headers (sequence,
//   count, type) are checked per piece as before, so a count or type mismatch fails the receiver
//   with kMismatch, which tells the sender through the abort record.
// - Every op completes exactly once: successfully when its lane finishes (the group keeps
//   running the others), else with the group's error, which names every unfinished op.
// - Every wait is bounded: the runner's no-progress timeout covers the whole group (any lane
//   moving is progress), and abort ends it with kAborted like any run.
// - A group may stay open: a thread that runs it for one op's wait pauses it when that op is done
//   (the others keep their progress), so a caller that always keeps a recv posted ahead (a
//   pipeline) is never held until the group drains, which its peer may wait on. While a group
//   is open (CommState::openGroup) it is the queue's front: the next thread that helps, or the
//   progress thread, resumes it, and nothing queued behind it starts before it drained.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "comm/detail/op_plan.h"
#include "comm/detail/state.h"
#include "comm/engine/program_runner.h"

namespace braid::comm {

/// The ops of one group run and how they join and finish; lives on the executing thread's stack.
class P2pGroup final : public LaneFeed {
 public:
  explicit P2pGroup(CommState& state);

  /// Takes the point-to-point ops at the front of the queue (caller holds queueMutex), appending
  /// a lane for each with a count; an op with none completes at once.
  void take(std::vector<LaneRun>* lanes);
  /// Ends every op not yet finished with `code` and `message`; `byRunner` false when another
  /// thread than the one that runs groups does it (a paused group failed by abort).
  void failUnfinished(ErrorCode code, const std::string& message, bool byRunner = true);

  /// The run pauses once `op` (null: none) finished: its waiter goes back to its caller.
  void pauseWhenDone(const CommState::Op* op) {
    pauseFor_ = op;
    pause_ = false;
  }

  void admit(std::vector<LaneRun>* joined) override;
  void finished(size_t index) override;
  /// A recv from any source matched: its op records the sender and the bytes (Request::received).
  void matched(size_t index, int peer, size_t count) override;
  bool pause() override { return pause_; }

 private:
  struct Member {
    CommState::OpPtr op;
    Plan plan;
    bool done = false;
  };
  CommState& state_;
  // Admitted ops not yet finished, and finished ones behind an unfinished one (freed from the
  // front as they finish: a group that never drains stays small). A deque: lanes point into the
  // plans of the members before the new ones.
  std::deque<Member> members_;
  size_t firstIndex_ = 0;    // the lane index of members_.front()
  uint64_t seenPushes_ = 0;  // the queue's push count when this group last looked
  const CommState::Op* pauseFor_ = nullptr;
  bool pause_ = false;
};

}  // namespace braid::comm
