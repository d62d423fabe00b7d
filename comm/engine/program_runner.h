// The one engine behind host and device collectives: runs one rank's program over a transport
// endpoint, or a group of point-to-point ops, each a lane with its own arguments. It owns the lane
// cursors, header checks (and probes), liveness, the idle policy (spin, or yield when
// oversubscribed, then sleep on the doorbell in slices), the deadline and every wait's error text.
// What a piece does to memory is the PieceEngine's: the host copies and reduces it at once; the
// device launches kernels and finishes them in finish(), after which the runner releases the
// consumed slots and posts the filled ones.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "comm/engine/active_window.h"
#include "comm/engine/header.h"
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
  /// The op's size in errors where the header's count does not give it (allToAllv: the bytes
  /// this rank sends); SIZE_MAX: header count x element size.
  size_t describedBytes = SIZE_MAX;
  /// A recv from any source: its step's recvPeer is kAnySource and its count the most it takes;
  /// the runner matches it to a peer's message (ProgramRunner::runGroup).
  bool anySource = false;
};

/// A point-to-point recv step's recvPeer when it receives from any source (ExecArgs::anySource).
constexpr int kAnySource = -1;

/// One piece of one step, everything it needs already there (received slots, a free slot to
/// send into). Addresses are in the engine's memory (host or device).
struct Piece {
  Prim prim = Prim::kCopy;
  const void* slot = nullptr;               ///< the received piece (receiving prims)
  const void* const* gatherSrcs = nullptr;  ///< kGatherReduce: every rank's piece, own included
  int gatherCount = 0;
  void* out = nullptr;        ///< the slot to fill (sending prims)
  const char* src = nullptr;  ///< this rank's input piece (prims that read)
  char* dst = nullptr;        ///< this rank's output piece (prims that write)
  size_t len = 0;             ///< elements
  size_t bytes = 0;
  uint64_t divisor = 1;  ///< > 1: divide the final result by it (avg)
  /// Sending prims: the out channel's receiverLineNanos() (0: unknown), for engines that fill
  /// slots bound for a far core with streaming stores.
  uint32_t receiverLineNanos = 0;
};

class ProgramRunner;

/// One lane of a run and the arguments it runs with. A collective's lanes share one ExecArgs; in
/// a point-to-point group each op is a lane with its own buffer, count, type and header.
struct LaneRun {
  const Lane* lane = nullptr;
  const ExecArgs* args = nullptr;
};

/// Feeds a point-to-point group run: ops posted while it runs join it, and each op is reported
/// finished as soon as its lane is (its waiter need not wait for the whole group).
class LaneFeed {
 public:
  virtual ~LaneFeed() = default;
  /// Appends lanes that joined since the last call; called between sweeps, so it must be cheap
  /// when nothing joined. A lane and its args stay valid until finished() reports it.
  virtual void admit(std::vector<LaneRun>* joined) = 0;
  /// The lane admitted `index`-th (the run's initial lanes first, from 0) finished; the runner
  /// no longer uses that lane or its args.
  virtual void finished(size_t index) = 0;
  /// The lane admitted `index`-th, a recv from any source, took its first piece from `peer`,
  /// whose message holds `count` elements (before finished()).
  virtual void matched(size_t index, int peer, size_t count) {
    (void)index;
    (void)peer;
    (void)count;
  }
  /// Asked between sweeps: true makes the run return, its unfinished lanes kept where they are
  /// for ProgramRunner::resumeGroup (a thread that ran the group for one op's wait goes back to
  /// its caller once that op is done, while the others stay posted).
  virtual bool pause() { return false; }
};

/// What a piece does to memory; one call per piece (never per element).
class PieceEngine {
 public:
  virtual ~PieceEngine() = default;
  /// Moves (or, when deferred, launches) one piece.
  virtual void move(const Piece& piece, const ExecArgs& args) = 0;
  /// Deferred engines: waits until every piece launched since the last call is done; waits that
  /// end badly go through runner.failWaiting. The runner commits those pieces after it returns.
  virtual void finish(ProgramRunner& runner, const ExecArgs& args) {
    (void)runner;
    (void)args;
  }
  /// Before a run fails: lets launched work end (buffers are given back after the error).
  virtual void abandon() {}
  /// Appended to the op's description in errors (" on the device").
  virtual const char* where() const { return ""; }
  /// True: move() only launches; the runner moves at most one piece per lane per sweep and
  /// releases/posts its slots only after finish().
  bool deferred() const { return deferred_; }

 protected:
  explicit PieceEngine(bool deferred) : deferred_(deferred) {}

 private:
  bool deferred_;
};

class ProgramRunner {
 public:
  /// `oversubscribed`: ranks on this host outnumber the cores they may run on (then waits yield
  /// the core at once instead of spinning).
  ProgramRunner(transport::Endpoint& endpoint, const std::atomic<bool>& aborted,
                bool oversubscribed, PieceEngine& engine);

  /// Runs `program` to completion. Throws braid::Error (kTimeout, kRemoteError, kMismatch,
  /// kAborted, and what the engine throws) naming this rank, the peer, and what(args).
  void run(const RankProgram& program, const ExecArgs& args);
  /// Runs point-to-point lanes together (a group, see comm/detail/p2p_group.h): every lane
  /// progresses whenever its peer lets it, in any order, and lanes joined through `feed` start at
  /// once. Two lanes on the same (peer, direction, channel) run one after the other in admission
  /// order, so their messages never interleave in that channel's FIFO and the receiver's n-th recv
  /// from a peer meets the sender's n-th send to it. Fails the whole group as run() fails. Returns
  /// true when every lane finished, false when feed.pause() stopped it (then resumeGroup goes on,
  /// and no other run may come between).
  /// A recv from any source (ExecArgs::anySource) takes the first message whose tag is its own
  /// from any peer whose stream no earlier-posted recv waits on (a recv from that peer, or from
  /// any source with that tag, posted before it), and reports the peer through feed.matched().
  bool runGroup(const std::vector<LaneRun>& lanes, LaneFeed& feed);
  /// Goes on with the group a runGroup or resumeGroup paused; returns as runGroup does.
  bool resumeGroup(LaneFeed& feed);

  /// Fails the current run: `why` plus what every unfinished lane waits for.
  [[noreturn]] void failWaiting(ErrorCode code, const ExecArgs& args, const std::string& why);
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }
  int rank() const { return rank_; }
  /// "allreduce #3 (1024 x float, sum, ring, 131072-byte pieces) of 4096 bytes", for errors.
  std::string what(const ExecArgs& args) const;
  /// Called (on the running thread) once per idle period, when a wait is about to sleep, with
  /// what it waits for (as failWaiting names it): the status board's "waiting for" text.
  void onWaiting(std::function<void(const std::string&)> fn) { onWaiting_ = std::move(fn); }
  /// Payload bytes this rank has sent to / received from `peer` (any thread, any time).
  uint64_t bytesSentTo(int peer) const { return sentTo_[peer].load(std::memory_order_relaxed); }
  uint64_t bytesReceivedFrom(int peer) const {
    return receivedFrom_[peer].load(std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kNoLane = ~size_t(0);
  struct Cursor {
    const Lane* lane = nullptr;  // with args: not used once finished (a feed may free them)
    const ExecArgs* args = nullptr;
    transport::MessageMeta meta;  // args->header encoded: sent with, and expected in, each message
    size_t elemSize = 0;
    size_t index = 0;        // admission order, for LaneFeed::finished
    size_t after = kNoLane;  // the lane (index) that must finish first: same peer and direction
    size_t step = 0;
    size_t piece = 0;
    bool finished = false;   // counted and reported finished
    bool p2pRecv = false;    // a point-to-point recv (one step): numbered when it starts
    bool anySource = false;  // ... from any source: `matched` is its step once started
    bool started = false;    // p2p recv: reads its peer's stream (from its first piece on)
    int from = -1;           // p2p recv, once started: the peer
    Step matched;            // an any-source recv's step once started: the peer and its count
    bool atEnd() const { return step >= lane->steps.size(); }
    bool done() const { return finished; }
  };
  /// A launched piece of a deferred engine, committed after finish().
  struct Pending {
    Cursor* cursor = nullptr;
    transport::RecvChannel* in = nullptr;  // null for a gather (commit releases every peer's)
    transport::SendChannel* out = nullptr;
    size_t bytes = 0;
  };
  /// Runs the lanes in cursors_ (and, with feed_, those that join) to completion (true) or until
  /// feed_ pauses the run (false).
  bool runCursors();
  /// Forgets a group's lanes (its feed may free them).
  void endGroup();
  /// After any failure of a run: lets the engine's launched pieces end and forgets them.
  void abandonLaunched();
  /// Appends a cursor for `run`, ordered after the last lane on its peer and direction (groups).
  void addCursor(const LaneRun& run);
  /// Takes the lanes feed_ has for the run (point-to-point groups); counts them as unfinished.
  /// True when any joined.
  bool admitJoined(size_t* unfinished);
  /// A lane ran its last step: marks it finished, counts it and tells feed_.
  void laneFinished(Cursor& c, size_t* unfinished);
  /// Whether the lane before `c` on its peer and direction is still unfinished.
  bool waitsForEarlier(const Cursor& c) const;
  /// Drops finished lanes at the front of cursors_ (groups; none of pending_ then).
  void dropFinishedFront();
  bool tryPiece(Cursor& cursor);
  /// The step a cursor stands at (an any-source recv's, once matched, names the sender).
  const Step& stepOf(const Cursor& c) const {
    return c.anySource && c.started ? c.matched : c.lane->steps[c.step];
  }
  /// A point-to-point recv at its start: picks its peer (any source: the first that has a
  /// message with its tag that no earlier recv waits for), checks it may read that peer's stream
  /// now, and numbers it (the n-th recv from a peer expects the peer's n-th send). False: not yet.
  bool startRecv(Cursor& c);
  /// An any-source recv's peer: the first (round robin) with a matching message it may take, or
  /// -1; that message's size and header in *bytes and *meta.
  int matchAnySource(const Cursor& c, size_t* bytes, transport::MessageMeta* meta);
  /// Whether a recv posted before `c` has the first claim on `peer`'s next message `meta`: a
  /// recv from that peer not yet started, or an unmatched recv from any source with meta's tag.
  bool earlierClaims(const Cursor& c, int peer, const transport::MessageMeta& meta) const;
  /// Releases the consumed slots, posts the filled one, and moves the cursor on.
  void commit(Cursor& c, const Step& s, transport::RecvChannel* in, transport::SendChannel* out,
              size_t bytes);
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
                   const Cursor& c);
  /// Fails with kMismatch when a peer's message numbered like this op describes another call
  /// (a rank that disagrees may never send what this rank waits for: two broadcast "roots" only
  /// send). Looks at the head of every channel, dropping only probes.
  void checkArrivals(const ExecArgs& args);
  /// Runs every unfinished lane as far as it goes now (deferred: one piece per lane, then
  /// finishes and commits them); true when any piece moved.
  bool advanceAll(size_t* unfinished);
  /// Fails on an abort (this process's or a peer's), on a mismatch seen in arrivals and, with
  /// checkPeers, on a gone peer that the current steps still wait on.
  void slowPathChecks(const ExecArgs& args, bool checkPeers);
  /// The first peer that is gone while a current step still needs it (its message is missing, or
  /// no slot to it is free), or -1. A peer that left after posting what is needed is not one.
  int goneAwaitedPeer(const ExecArgs& args);
  char* address(Buf buf, size_t elemOffset, const Cursor& c) const;

  transport::Endpoint& ep_;
  const std::atomic<bool>& aborted_;
  PieceEngine& engine_;
  int rank_;
  int size_;
  // The run's arguments: a collective's, or a group's first op's (every op of a group was issued
  // after the same collectives, which is all that probes and arrival checks ask of them).
  const ExecArgs* runArgs_ = nullptr;
  transport::MessageMeta expectedMeta_;  // runArgs_->header encoded
  LaneFeed* feed_ = nullptr;             // a point-to-point group's, else null
  ExecArgs groupArgs_;                   // a group's runArgs_: its first op's, copied
  std::vector<LaneRun> joined_;
  std::map<std::tuple<bool, int, int>, size_t> lastOn_;  // (sends, peer, channel) -> last lane
  size_t firstIndex_ = 0;                                // the index of cursors_.front()
  bool oversubscribed_ = false;
  bool deferred_ = false;
  int spinRounds_ = 0;
  ActiveWindow activeWindow_;   // how long a wait stays active before it sleeps
  bool probed_ = false;         // this run sent its probes
  std::deque<Cursor> cursors_;  // a deque: joining lanes leave the others' addresses alone
  std::vector<Pending> pending_;
  std::vector<const void*> gatherSrcs_;
  // Point-to-point recvs: per peer, those ever started (the next one's number, as the peer's
  // sends count) and the lane reading its stream now (kNoLane: none); any-source recvs of this
  // run not yet matched; the peer an any-source recv looks at first (round robin).
  std::vector<uint64_t> recvsFrom_;
  std::vector<size_t> recvOwner_;
  size_t unmatchedAny_ = 0;
  int anyNext_ = 0;
  std::function<void(const std::string&)> onWaiting_;
  // Payload bytes posted to / consumed from each peer since creation (relaxed: written by the
  // running thread only, read by reports from any thread).
  std::unique_ptr<std::atomic<uint64_t>[]> sentTo_, receivedFrom_;
  /// "; waiting to receive from peer rank 1 on channel 0; ..." for every unfinished lane (the
  /// count of those in *unfinished).
  std::string waitingText(size_t* unfinished) const;
};

}  // namespace braid::comm
