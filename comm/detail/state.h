// The inside of a communicator, host or device: endpoint, executor, sequence numbers, the op queue
// and its progress thread, and the broken/aborted state. What differs between host and device
// memory is the Medium (comm/detail/medium.h). Internal to comm/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/store.h"
#include "comm/detail/flight_recorder.h"
#include "comm/detail/medium.h"
#include "comm/detail/status_board.h"
#include "comm/detail/op_plan.h"
#include "comm/detail/tuner.h"
#include "comm/engine/executor.h"
#include "comm/exec/single_copy.h"
#include "transport/shared_buffer.h"
#include "transport/transport.h"

namespace braid {

namespace bootstrap {
class StoreServer;
}

using comm::OpDesc;

namespace comm {
class P2pGroup;
}

struct Request::Op {
  OpDesc desc;
  double timeoutSeconds = 60;
  std::weak_ptr<CommState> state;  // lets wait() run the op inline instead of a thread hand-off
  uint64_t ticket = 0;  ///< the medium's number for it (Medium::beforeRun, finished); 0: none
  // Completion without a lock on the fast path: the completer writes code and message, then
  // stores done (release); a reader that sees done (acquire) sees them. A thread that sleeps on
  // doneCv counts itself in sleepers under the mutex first, and the completer, after storing
  // done, takes the mutex and notifies only when sleepers > 0 (seq_cst on both: either the
  // completer sees the sleeper, or the sleeper sees done before it sleeps).
  std::mutex mutex;
  std::condition_variable doneCv;
  std::atomic<bool> done{false};
  std::atomic<int> sleepers{0};
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  RecvResult received;  ///< a recv from any source: the matched sender and bytes (P2pGroup)
  bool isDone() const { return done.load(std::memory_order_acquire); }
  /// Sleeps until done or `until` (time_point::max(): no bound); true when done.
  bool sleepUntilDone(Clock::time_point until);
};

struct ResolvedOptions {
  double timeoutSeconds = 60;
  std::string transport;  ///< "" = by capability
  Algorithm algorithm = Algorithm::kAuto;
  size_t slotBytes = 128 << 10;
  int slots = 8;
  int channels = 1;
  bool chunkSet = false;         ///< slot size given by Options::chunkBytes or BRAID_CHUNK
  bool channelsSet = false;      ///< lanes given by Options::channels or BRAID_CHANNELS
  size_t streamBytes = 8 << 20;  ///< outputs this large are written with streaming stores
  std::string hostName;          ///< Options::hostName ("" = BRAID_HOSTNAME / fingerprint)
  size_t flightOps = 2000;       ///< BRAID_FLIGHT_OPS: ops the flight recorder keeps (0: none)
  std::string dumpDir;           ///< BRAID_DUMP_DIR: where the first failure dumps it ("": no)
  bool statusBoard = true;       ///< BRAID_STATUS_BOARD=0: no status board (no stuck-rank lines)
  bool singleCopy = true;        ///< BRAID_SINGLE_COPY=0: never the single-copy all-reduce
  bool deterministic = false;    ///< Options::deterministic or BRAID_DETERMINISTIC=1
  /// BRAID_PICK_CHUNK=1: the tuner also prices pieces of half and a quarter of the slot for chain,
  /// tree and hier, and the op runs in the pieces it chose (off by default: not yet measured)
  bool pickChunk = false;
  /// BRAID_SINGLE_COPY_BYTES: auto chooses single copy from this size; by default never (it
  /// measured slower than the ring here, bench/RESULTS.md), so only BRAID_ALGO=singlecopy runs it
  size_t singleCopyBytes = SIZE_MAX;
  /// BRAID_MAPPED_COPY_BYTES: from this size an all-reduce between processes of one host whose
  /// buffers are braid::memAlloc ones on every rank takes the mapped single copy (one pass, no
  /// slots), whatever auto chose; SIZE_MAX: never.
  size_t mappedCopyBytes = 256 << 10;
  /// The same between ranks that are all threads of one process (any buffers): by default from
  /// 16 KiB, where it measured faster than the ring in both placements (bench/RESULTS.md, "Ranks
  /// as threads"); BRAID_MAPPED_COPY_BYTES sets both.
  size_t threadMappedCopyBytes = 16 << 10;
};

/// Reads Options plus BRAID_* overrides; throws kInvalidUsage naming a bad value.
ResolvedOptions resolveOptions(const Options& options);

struct CommState;
/// After a rank's init: drops its store connection, telling the store's host it is done
/// (comm/rendezvous.cc).
void leaveRendezvous(CommState& state);
/// In destroy, on the rank hosting the store: waits (bounded by the timeout) until every other
/// rank has left it, then closes it (comm/rendezvous.cc). `connected`: this rank's init completed
/// (after a failed init or an abort it closes at once).
void closeRendezvous(CommState& state, bool connected);
/// Adds `state` to the live communicators (live_comms.h: whose status SIGUSR1 logs and the status
/// server serves), installing the SIGUSR1 handler (comm/status_signal.cc) at the first call unless
/// the program handles SIGUSR1 or BRAID_STATUS_SIGNAL=0.
void registerForStatusSignal(const std::weak_ptr<CommState>& state);

struct CommState {
  CommState(int rank, int size, const ResolvedOptions& options);
  ~CommState();
  /// A state that knows itself (self), on the host medium unless `medium` is given.
  static std::shared_ptr<CommState> make(int rank, int size, const ResolvedOptions& options,
                                         std::unique_ptr<comm::Medium> medium = nullptr);
  /// Takes the connected endpoint and makes the executor over it with `pieces` (the medium's
  /// piece engine). `oversubscribed`: ranks on this host outnumber their cores (waits yield).
  void start(std::unique_ptr<transport::Endpoint> connected,
             std::unique_ptr<comm::PieceEngine> pieces, bool oversubscribed);

  using Op = Request::Op;
  using OpPtr = std::shared_ptr<Op>;

  int rank;
  int size;
  ResolvedOptions options;
  std::unique_ptr<bootstrap::StoreServer> server;  // the rendezvous, when this rank hosts it
  std::shared_ptr<bootstrap::Store> store;
  std::unique_ptr<transport::Endpoint> endpoint;
  /// Host memory unless the device communicator installs its own (setMedium) before any call.
  std::unique_ptr<comm::Medium> medium;
  bool callersRun = true;  ///< medium->callersRun(), read on every submit
  std::unique_ptr<comm::Executor> executor;
  /// Node index per rank: ranks with the same host key share a node, numbered densely in order of
  /// their lowest rank. Passed to every schedule (the hierarchical one groups by it).
  std::vector<int> nodeOf;
  std::shared_ptr<const comm::TunerModel> tunerModel;  ///< cluster graph + cost model (init.cc)
  /// The single-copy all-reduce (comm/exec/single_copy.h) where every rank may read every
  /// other's memory (create/peer_memory.cc), with each rank's pid; else null and why not.
  std::unique_ptr<comm::SingleCopy> singleCopy;
  std::vector<comm::PeerBuffers> singleCopyPeers;
  std::string singleCopyWhy = "not a host communicator";
  /// Where some peer is a thread of this process: this rank's buffers lent to them for each
  /// single copy (opened in publishAndMap, closed by runOp before it returns); else null.
  std::shared_ptr<comm::BufferLease> ownLease;
  bool peersThreads = false;  ///< every peer is a thread of this process (peersAreThreads)
  transport::SharedMappings sharedMappings;  ///< peers' memAlloc buffers mapped here
  bool mappedCopyLogged = false;             ///< the first mapped single copy is logged (INFO)
  std::atomic<bool> aborted{false};

  // Issue order and numbering (under queueMutex, so numbering order is execution order).
  comm::OpNumbering numbering;

  // Execution: one op at a time, in issue order, except that point-to-point ops queued together
  // run as one group (comm/detail/p2p_group.h); blocking collectives run on the caller's thread
  // when nothing is queued, the rest on the progress thread or a waiting caller's.
  std::mutex queueMutex;
  std::condition_variable waitersCv;  // threads in helpUntilDone: an executor became free
  std::condition_variable workerCv;   // the progress thread: work may be there
  std::deque<std::shared_ptr<Request::Op>> queue;
  /// Ops kept for reuse (reusableOpLocked), oldest first.
  std::deque<std::shared_ptr<Request::Op>> opPool;
  /// Point-to-point ops that run as one group and are not all finished: while set, it comes
  /// before everything queued (comm/detail/p2p_group.h); paused when nobody runs it (!busy).
  std::unique_ptr<comm::P2pGroup> openGroup;
  Clock::time_point groupPausedAt;
  std::atomic<uint64_t> queuePushes{0};  // ops ever queued (written under queueMutex): a running
                                         // group reads it to see cheaply whether ops may join
  bool busy = false;
  bool stopping = false;
  int waiters = 0;            // threads inside helpUntilDone
  bool workerParked = false;  // the progress thread sleeps until notified
  bool hurry = false;  // a caller waits for the progress thread to run a queued op: no grace
  bool workerStarted = false;  // the progress thread ran Medium::progressThreadStarted()
  std::thread worker;

  // Set by the first failure; every later call fails with it.
  std::mutex errorMutex;
  std::optional<Error> broken;
  /// Set (release) once `broken` holds a failure, so that runs look at it without the mutex.
  std::atomic<bool> brokenSeen{false};

  /// The last options.flightOps ops (flight_recorder.h), dumped at the first failure.
  comm::FlightRecorder recorder;
  /// This host's ranks' standing (status_board.h), for statusReport(); null before connect or
  /// where shared memory failed (boardWhy says why). hosts: each rank's host, from the meeting.
  std::unique_ptr<comm::StatusBoard> board;
  std::string boardWhy = "not connected yet";
  std::vector<std::string> hosts;
  std::string jobId;   ///< the meeting's (names the board and this job at the status server)
  std::string secret;  ///< the job secret (answers the status server's challenge)
  /// Per rank on another host, where its process's status server listens (status_server.h);
  /// "" for this host's ranks, or where it had none.
  std::vector<std::string> statusAddresses;

  /// An op's end for the recorder and, when it ran (see completeOp), the board (error "" when it
  /// succeeded).
  void opEnded(const OpDesc& d, std::string_view error, bool ran = true);
  /// The stuck-rank report (Communicator::statusReport).
  std::string statusReport() const;
  /// Its lines: this host's board, and the other hosts' asked through their status servers.
  std::string otherHostsReport() const;

  // Programs by (shape, family, count, root, lanes, inPlace, elemsPerPiece).
  using ProgramKey = std::tuple<int, int, size_t, int, int, bool, size_t>;
  std::map<ProgramKey, std::shared_ptr<const comm::RankProgram>> programs;
  // The last one program() returned (a program of `programs`; null after they are cleared):
  // repeated calls of one shape skip the map's lookup.
  ProgramKey lastProgramKey;
  const comm::RankProgram* lastProgram = nullptr;

  /// Validates and numbers a call (throws kInvalidUsage, touching nothing). Caller holds
  /// queueMutex, so numbering order is execution order.
  OpDesc issue(OpDesc desc);
  /// Queues a numbered op for the progress thread (caller holds queueMutex); with
  /// `forProgressThread` false the caller runs the queue's front itself at once.
  /// A fresh op, or one of opPool nobody holds any more, reset (caller holds queueMutex).
  std::shared_ptr<Request::Op> reusableOpLocked();
  std::shared_ptr<Request::Op> enqueueLocked(const OpDesc& desc, bool forProgressThread = true,
                                             uint64_t ticket = 0);
  /// Starts the progress thread, or wakes it when parked. Caller holds queueMutex.
  void wakeWorkerLocked();
  /// Runs a numbered op to completion on this thread (a queued one with its medium ticket),
  /// recording its start, and its end when it fails, in the flight recorder (the caller records
  /// a success: completeOp, or runBlocking).
  void execute(const OpDesc& desc, uint64_t ticket = 0);
  /// execute() without the end's record.
  void runOp(const OpDesc& desc, uint64_t ticket);
  /// Runs a planned single-copy all-reduce but its completion exchange: the exchange of buffer
  /// addresses (a direct all-gather under the op's header), this rank's share, a confirmation,
  /// the other shares (comm/single_copy_op.cc).
  void runSingleCopy(const comm::ExecArgs& args, size_t count);
  /// The mapped single copy if every rank's buffers are mapped here (true: it ran, but its
  /// completion exchange); false, after the address exchange, otherwise (the caller runs its
  /// planned program). Every rank calls it for the same ops (mappedCopyCandidate).
  bool runMappedCopy(const comm::ExecArgs& args, size_t count);
  /// Whether runOp tries the mapped single copy for an all-reduce of `bytes` (the same answer on
  /// every rank: the op and the communicator alone decide).
  bool mappedCopyCandidate(Collective coll, size_t bytes) const;
  /// Whether every peer is a thread of this process (the mapped single copy needs no memAlloc
  /// buffers then: their addresses are ours).
  bool peersAreThreads() const;
  /// Whether runOp runs an all-gather, reduce-scatter or broadcast of `totalBytes` (the larger
  /// buffer's) by address between threads (runThreadCopy), decided alike on every rank.
  bool threadCopyCandidate(Collective coll, size_t totalBytes) const;
  /// That op but its completion exchange: the address exchange, then one pass reading the peers'
  /// inputs (comm/exec/single_copy.h).
  void runThreadCopy(const OpDesc& d, const comm::ExecArgs& args);
  /// The address exchange of both forms, the mapping of every peer's memAlloc buffers, and the
  /// agreement whether every rank mapped every peer's (comm/single_copy_op.cc).
  bool publishAndMap(const comm::ExecArgs& args, size_t count);
  /// Whether every rank passed `mine` = true (a one-byte minimum under the op's header; host
  /// communicators only).
  bool allAgree(const comm::ExecArgs& args, bool mine);
  /// The one-byte direct exchange under the op's header both of those run: `op` over every
  /// rank's byte at `in` into `out` (this medium's memory).
  void exchangeOneByte(const comm::ExecArgs& args, void* in, void* out, RedOp op);
  /// Every rank tells every other it got here, under the op's header (a one-byte direct
  /// exchange): the completion exchanges, and single copy's "my share is ready".
  void confirmToAll(const comm::ExecArgs& args);
  /// Runs a planned rank-order reduction (comm/rank_order_op.cc) but its completion exchanges.
  void runRankOrder(const OpDesc& d, const comm::ExecArgs& args);
  std::vector<char> rankOrderScratch;  // the blocks every rank sent this rank (rank order)
  /// Blocking entry: inline when idle, else queued behind earlier non-blocking ops.
  void runBlocking(const OpDesc& desc);
  /// Non-blocking entry.
  Request submit(const OpDesc& desc);
  /// Entry where callers never wait on a Request (Medium::callersRun false; the device): checks,
  /// plans and numbers the call, then `admit` (under queueMutex) orders the caller with the op and
  /// returns its ticket, and the op is queued for the progress thread. Count 0 queues nothing.
  /// Throws the communicator's failure, kAborted, issue()'s kInvalidUsage, or admit's error (which
  /// breaks the communicator: the op was numbered but never queued).
  void submitTicketed(const OpDesc& desc, const std::function<uint64_t()>& admit);
  /// The first failure, or one the medium saw outside any op (which becomes it). Caller holds
  /// errorMutex.
  const std::optional<Error>& brokenLocked();
  void abort(const std::string& why);
  /// Completes every queued op with `cause` (the communicator broke) and empties the queue.
  void failQueued(const Error& cause);
  void workerLoop();
  /// Waits for `target` by running queued ops on this thread whenever nobody else is executing
  /// (the progress thread stands back while someone waits, so on a busy machine no two threads of
  /// one rank fight for a core). Returns when target is done or at the deadline.
  void helpUntilDone(const std::shared_ptr<Request::Op>& target, Deadline deadline);
  /// Runs the open group, else pops the front op and runs it, on this thread (queueMutex held
  /// on entry and exit, released while it runs); a point-to-point one with those behind it as a
  /// group. `forOp`: the op this thread waits for (a group pauses once it is done).
  void runFront(std::unique_lock<std::mutex>& lock, const Request::Op* forOp = nullptr);
  /// Resumes the open group, or runs the point-to-point ops at the queue's front as a new one,
  /// with those that join, until it drained or `forOp` is done (comm/p2p_group.cc; queueMutex
  /// held on entry and exit, released while it runs).
  void runP2pGroup(std::unique_lock<std::mutex>& lock, const Request::Op* forOp);
  /// Ends a paused open group's ops with kAborted (caller holds queueMutex).
  void failOpenGroup(const std::string& why);
  /// After a run failed with `e` (not kInvalidUsage): marks the communicator broken, tells the
  /// peers, and fails every queued op.
  void breakOn(const Error& e);
  /// Marks an op finished with `code` (kOk: success), tells the medium, and wakes whoever waits
  /// on it. `ran`: false for an op ended before it ever ran (flushed from the queue by abort,
  /// destroy or a failure), possibly on another thread than the executing one, which the status
  /// board (written only by the thread that runs ops) is then left out of.
  void completeOp(Request::Op& op, ErrorCode code, std::string message, bool ran = true);
  /// Runs one dequeued op and completes it (never throws).
  void runQueued(const std::shared_ptr<Request::Op>& op);
  std::weak_ptr<CommState> self;
  /// The tuner's inputs, built once by refreshTunerConfig() (at start, and again where init
  /// learns what changes them: single copy tested), not per op: it holds the model's shared_ptr.
  const comm::TunerConfig& tunerConfig() const { return tunerCache; }
  void refreshTunerConfig();
  comm::TunerConfig tunerCache;
  /// The program for `spec` (nodeOf is the communicator's; the caller leaves it empty), kept in
  /// `programs` (allToAllv's per-call layouts in lastPerPeer). Valid until the next call.
  const comm::RankProgram& program(const comm::ScheduleSpec& spec);
  std::shared_ptr<const comm::RankProgram> lastPerPeer;
};

}  // namespace braid
