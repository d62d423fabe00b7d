// Communicator calls: validation, numbering, the op queue and its progress thread, execution.
#include <fmt/format.h>
#include <sched.h>

#include <cstring>
#include <map>
#include <set>

#include "comm/bootstrap/server.h"
#include "comm/detail/op_rules.h"
#include "comm/detail/p2p_group.h"
#include "comm/detail/progress_pace.h"
#include "comm/detail/state.h"
#include "comm/detail/status_server.h"
#include "common/log.h"
#include "common/ticks.h"

namespace braid {
namespace {

using comm::bufferCounts;
using comm::overlaps;
using comm::shapeOf;

}  // namespace

CommState::CommState(int r, int n, const ResolvedOptions& o)
    : rank(r),
      size(n),
      options(o),
      medium(std::make_unique<comm::HostMedium>(r)),
      numbering(n),
      recorder(o.flightOps) {}

std::shared_ptr<CommState> CommState::make(int rank, int size, const ResolvedOptions& options,
                                           std::unique_ptr<comm::Medium> medium) {
  auto state = std::make_shared<CommState>(rank, size, options);
  state->self = state;
  if (medium) {
    state->medium = std::move(medium);
    state->callersRun = state->medium->callersRun();
  }
  return state;
}

void CommState::start(std::unique_ptr<transport::Endpoint> connected,
                      std::unique_ptr<comm::PieceEngine> pieces, bool oversubscribed) {
  endpoint = std::move(connected);
  refreshTunerConfig();
  executor =
      std::make_unique<comm::Executor>(*endpoint, aborted, oversubscribed, std::move(pieces));
  if (!medium->callersRun()) {
    // Only the progress thread runs ops (the device): start it now, and let it set itself up
    // (progressThreadStarted: CUDA's per-thread state) before any call can make a stream wait
    // for it.
    std::unique_lock<std::mutex> lock(queueMutex);
    wakeWorkerLocked();
    const bool ready = waitersCv.wait_for(lock, std::chrono::seconds(60),
                                          [&] { return workerStarted; });
    BRAID_ENFORCE(ready, ErrorCode::kTimeout,
                  "rank {}: the communicator's progress thread did not start within 60 s", rank);
  }
}

void CommState::completeOp(Request::Op& op, ErrorCode code, std::string message, bool ran) {
  op.code = code;
  op.message = std::move(message);
  // opEnded before done: a waiter that returns may destroy the communicator's records' owner.
  opEnded(op.desc, code == ErrorCode::kOk ? std::string_view() : std::string_view(op.message), ran);
  op.done.store(true, std::memory_order_seq_cst);
  if (op.sleepers.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> opLock(op.mutex); }  // a counted sleeper is inside wait now
    op.doneCv.notify_all();
  }
  if (op.ticket != 0) medium->finished(op.ticket);
}

CommState::~CommState() {
  {
    std::lock_guard<std::mutex> lock(queueMutex);
    stopping = true;
    for (auto& op : queue) {
      completeOp(*op, ErrorCode::kAborted,
                 fmt::format("rank {}: {} was still queued when the communicator was destroyed",
                             rank, collectiveName(op->desc.coll)),
                 false);
    }
    queue.clear();
  }
  waitersCv.notify_all();
  workerCv.notify_all();
  if (worker.joinable()) worker.join();
  {
    std::lock_guard<std::mutex> lock(queueMutex);
    failOpenGroup(fmt::format(
        "rank {}: point-to-point op still posted when the communicator was destroyed", rank));
  }
  // The transport first (its destructor hands over or flushes what this rank posted), then the
  // store this rank may host, once the ranks still connecting are done with it.
  const bool connected = endpoint != nullptr;
  executor.reset();
  endpoint.reset();
  closeRendezvous(*this, connected);
}

void CommState::refreshTunerConfig() {
  comm::TunerConfig& config = tunerCache;
  config = comm::TunerConfig{};
  config.nranks = size;
  config.slotBytes = options.slotBytes;
  config.slots = options.slots;
  config.channels = options.channels;
  config.forced = options.algorithm;
  config.model = tunerModel;
  config.singleCopy = singleCopy != nullptr;
  config.singleCopyWhy = &singleCopyWhy;
  config.singleCopyMinBytes = options.singleCopyBytes;
  config.deterministic = options.deterministic;
  config.pickChunk = options.pickChunk;
}

OpDesc CommState::issue(OpDesc d) {
  setLogRank(rank);  // this thread's log lines name the rank it calls for
  size_t inBytes, outBytes;
  comm::validateOp(d, rank, size, &inBytes, &outBytes);
  if (d.count > 0 || d.coll == Collective::kAllToAllv) medium->checkBuffers(d, inBytes, outBytes);
  // Numbered in the order ops will execute (the caller holds queueMutex).
  uint64_t* counter = numbering.number(d);
  if (d.count > 0 && medium->planAtCall()) {
    // Only for its errors (a forced algorithm that cannot run this call): execute plans again.
    comm::planOp(d, rank, size, tunerConfig(), options.slotBytes, options.timeoutSeconds,
                 options.streamBytes);
  }
  // A send or recv of nothing moves no message (it completes at once), so it takes no number:
  // the runner numbers the recvs that read a message (ProgramRunner::startRecv).
  if (d.count > 0 || !isPointToPoint(d.coll)) ++*counter;
  // The op's one time at issue (shared with the status board at its start): the counter is
  // read only while the recorder keeps ops, the records' only per-op cost beyond a few stores.
  d.issuedTick = recorder.keeps() ? readTick() : 0;
  d.recorded = recorder.issued(d);
  return d;
}

const comm::RankProgram& CommState::program(const comm::ScheduleSpec& spec) {
  // Built with the communicator's node ids (hier groups ranks by them): callers leave them out,
  // so no op copies them.
  auto build = [&] {
    comm::ScheduleSpec full = spec;
    full.nodeOf = nodeOf;
    return std::make_shared<const comm::RankProgram>(comm::buildProgram(full, rank));
  };
  if (spec.perPeer) {
    // allToAllv: this call's own splits, not worth keeping.
    lastPerPeer = build();
    return *lastPerPeer;
  }
  ProgramKey key{int(spec.shape), int(spec.family), spec.count,        spec.root,
                 spec.lanes,      spec.inPlace,     spec.elemsPerPiece};
  if (lastProgram != nullptr && key == lastProgramKey) return *lastProgram;
  auto it = programs.find(key);
  if (it == programs.end()) {
    if (programs.size() >= 256) programs.clear();
    it = programs.emplace(key, build()).first;
  }
  lastProgramKey = key;
  lastProgram = it->second.get();
  return *lastProgram;
}

void CommState::execute(const OpDesc& d, uint64_t ticket) {
  try {
    runOp(d, ticket);
  } catch (const Error& e) {
    opEnded(d, e.what());
    throw;
  }
  // Success is recorded by the caller: completeOp for a queued op, runBlocking for its own.
}

void CommState::opEnded(const OpDesc& d, std::string_view error, bool ran) {
  const int64_t tick = recorder.ended(d, error);
  if (board && ran) board->ended(d, error.empty(), tick);
}

std::string CommState::otherHostsReport() const {
  std::vector<comm::StatusLine> lines = board->lines(hosts);
  // Per other host: its ranks' servers in rank order until one answers, within ~1 s each and
  // 5 s in all (a report must not wait on every frozen process of a large job).
  const Deadline all = Deadline::after(5.0);
  std::map<std::string, std::string> unanswered;  // host -> why
  std::set<std::string> asked;
  for (int q = 0; q < size; ++q) {
    if (hosts[q] == hosts[rank] || asked.count(hosts[q]) > 0) continue;
    asked.insert(hosts[q]);
    std::string why = "no rank there has a status server";
    for (int p = q; p < size; ++p) {
      if (hosts[p] != hosts[q] || p >= int(statusAddresses.size()) ||
          statusAddresses[p].empty()) {
        continue;
      }
      if (all.expired()) {
        why = "not asked: the report's 5 s were spent on other hosts";
        break;
      }
      std::vector<comm::StatusLine> theirs;
      std::string err;
      if (comm::askStatus(statusAddresses[p], jobId, hosts[q], secret,
                          all.earlier(Deadline::after(1.0)), &theirs, &err)) {
        lines.insert(lines.end(), theirs.begin(), theirs.end());
        why.clear();
        break;
      }
      why = fmt::format("rank {}'s process did not answer ({})", p, err);
    }
    if (!why.empty()) unanswered[hosts[q]] = why;
  }
  return comm::StatusBoard::format(size, lines, [&](int q) {
    auto it = unanswered.find(hosts[q]);
    return fmt::format("on host {}: no report from that host{}", hosts[q],
                       it == unanswered.end() ? "" : ": " + it->second);
  });
}

std::string CommState::statusReport() const {
  std::string out = fmt::format("braid status: rank {} of {}, host {}\n", rank, size,
                                rank < int(hosts.size()) ? hosts[rank] : "?");
  out += board ? otherHostsReport() : "  (no status board: " + boardWhy + ")\n";
  if (executor) {
    // This rank's traffic per peer since creation (payload bytes), the first 16 peers.
    const comm::ProgramRunner& runner = executor->runner();
    std::string traffic;
    int shown = 0;
    for (int q = 0; q < size && shown < 16; ++q) {
      if (q == rank) continue;
      traffic += fmt::format("{}rank {} {}/{}", traffic.empty() ? "" : ", ", q,
                             runner.bytesSentTo(q), runner.bytesReceivedFrom(q));
      ++shown;
    }
    if (!traffic.empty()) {
      out += fmt::format("  rank {}'s bytes sent/received since creation: {}{}\n", rank, traffic,
                         size - 1 > shown ? ", ..." : "");
    }
  }
  return out;
}

void CommState::runOp(const OpDesc& d, uint64_t ticket) {
  if (brokenSeen.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (broken) throw *broken;
  }
  if (aborted.load()) {
    fail(ErrorCode::kAborted, "rank {}: {}: the communicator was aborted", rank,
         collectiveName(d.coll));
  }
  // allToAllv runs at count 0 too: its peers confirm completion with every rank.
  if (d.count == 0 && d.coll != Collective::kBarrier && d.coll != Collective::kAllToAllv) return;
  if (ticket != 0) {
    try {
      medium->beforeRun(ticket, aborted);
    } catch (const Error& e) {
      opEnded(d, e.what());  // before the dump breakOn writes
      breakOn(e);
      throw;
    }
  }

  comm::Plan plan = comm::planOp(d, rank, size, tunerConfig(), options.slotBytes,
                                 options.timeoutSeconds, options.streamBytes);
  comm::ExecArgs& args = plan.args;
  const comm::RankProgram* prog = nullptr;
  if (!plan.isP2p) {
    comm::ScheduleSpec& spec = plan.spec;
    if (d.coll == Collective::kBarrier) {
      args.input = medium->scratchIn();
      args.output = medium->scratchOut();
    } else {
      BRAID_ENFORCE(comm::channelsUsed(spec.family, spec.lanes) <= endpoint->channels(),
                    ErrorCode::kInvalidUsage,
                    "rank {}: {} of {} bytes: algorithm '{}' needs {} channels per peer, the "
                    "communicator has {} (it opens two for BRAID_ALGO=auto or tree)",
                    rank, collectiveName(d.coll), plan.inBytes, algorithmName(spec.family),
                    comm::channelsUsed(spec.family, spec.lanes), endpoint->channels());
    }
    if (spec.family != Algorithm::kSingleCopy && spec.family != Algorithm::kRankOrder) {
      prog = &program(spec);
    }
  }
  bool singleCopied = !plan.isP2p && plan.spec.family == Algorithm::kSingleCopy;
  const bool rankOrdered = !plan.isP2p && plan.spec.family == Algorithm::kRankOrder;
  // The mapped single copy where every rank's buffers are memAlloc ones (single_copy_op.cc):
  // whether to try is decided alike on every rank, from the op and the communicator alone.
  const bool tryMapped = !plan.isP2p && !singleCopied && mappedCopyCandidate(d.coll, plan.inBytes);
  // Ranks that are all threads of this process: the other collectives by address too.
  bool threadCopy = false;
  if (peersThreads && !plan.isP2p && !singleCopied && !rankOrdered) {
    size_t inCount, outCount;
    comm::bufferCounts(d.coll, d.count, size, &inCount, &outCount);
    threadCopy =
        threadCopyCandidate(d.coll, std::max(inCount, outCount) * dataTypeSize(d.dtype));
  }

  // A single copy lends this rank's buffers to the ranks of its process (publishAndMap opens the
  // lease): none may still touch them once this call returns, however it returns.
  struct LeaseCloser {
    CommState& state;
    ~LeaseCloser() {
      if (state.ownLease) state.ownLease->close(state.rank, state.options.timeoutSeconds);
    }
  };
  std::optional<LeaseCloser> leaseCloser;
  if (singleCopied || tryMapped || threadCopy) leaseCloser.emplace(LeaseCloser{*this});

  recorder.started(d, plan.isP2p ? Algorithm::kAuto : plan.spec.family);
  if (board) board->started(d, plan.isP2p ? Algorithm::kAuto : plan.spec.family);
  BRAID_TRACE("rank {}: {} start", rank, comm::describeHeader(args.header));
  try {
    if (singleCopied) {
      runSingleCopy(args, d.count);
    } else if (tryMapped && runMappedCopy(args, d.count)) {
      singleCopied = true;
      recorder.ranAs(d, Algorithm::kSingleCopy);
      if (board) board->ranAs(Algorithm::kSingleCopy);
    } else if (threadCopy) {
      runThreadCopy(d, args);
      singleCopied = true;
      recorder.ranAs(d, Algorithm::kSingleCopy);
      if (board) board->ranAs(Algorithm::kSingleCopy);
    } else if (rankOrdered) {
      runRankOrder(d, args);
    } else {
      executor->run(prog ? *prog : plan.p2p, args);
    }
    // Single copy ends with one more: no rank leaves while a peer still uses its buffers. Rank
    // order's exchanges may leave a pair without a message: two, as allToAllv's.
    int exchanges = comm::completionExchanges(d.coll) + (singleCopied ? 1 : 0);
    if (rankOrdered) exchanges = std::max(exchanges, 2);
    // Every rank confirms to every other with this op's header, so no rank reports success for
    // a call another rank disagreed with (op_rules.h).
    for (int i = 0; i < exchanges; ++i) confirmToAll(args);
    BRAID_TRACE("rank {}: {} end", rank, comm::describeHeader(args.header));
  } catch (const Error& e) {
    opEnded(d, e.what());  // before the dump breakOn writes
    if (e.code() == ErrorCode::kTimeout) {
      BRAID_WARN("rank {}: {} timed out; where the ranks stand:\n{}", rank,
                 collectiveName(d.coll), statusReport());
    }
    if (e.code() != ErrorCode::kInvalidUsage) breakOn(e);
    throw;
  }
}

void CommState::confirmToAll(const comm::ExecArgs& args) {
  exchangeOneByte(args, medium->scratchIn(), medium->scratchOut(), RedOp::kMax);
}

bool CommState::allAgree(const comm::ExecArgs& args, bool mine) {
  // Host memory: only host communicators ask (single copy).
  uint8_t in = mine ? 1 : 0, out = in;
  exchangeOneByte(args, &in, &out, RedOp::kMin);
  return out != 0;
}

void CommState::exchangeOneByte(const comm::ExecArgs& args, void* in, void* out, RedOp op) {
  if (size < 2) return;
  // A one-byte direct exchange under the op's header.
  comm::ScheduleSpec fin;
  fin.nranks = size;
  fin.shape = Collective::kAllReduce;
  fin.family = Algorithm::kOneShot;
  fin.count = 1;
  fin.elemsPerPiece = options.slotBytes;
  comm::ExecArgs finArgs = args;
  finArgs.input = in;
  finArgs.output = out;
  finArgs.dtype = DataType::kUint8;
  finArgs.op = op;
  finArgs.elemsPerPiece = options.slotBytes;
  finArgs.streamOutput = false;
  executor->run(program(fin), finArgs);
}

void CommState::breakOn(const Error& e) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (!broken) {
      broken = e;
      brokenSeen.store(true, std::memory_order_release);
      first = true;
    }
  }
  if (first && !options.dumpDir.empty()) {
    // The first failure: what this rank was doing, for braid-trace to set beside its peers'.
    std::string why;
    const std::string path = recorder.dump(options.dumpDir, rank, size, e.what(), &why);
    if (path.empty()) {
      BRAID_WARN("rank {}: flight recorder: {}", rank, why);
    } else {
      BRAID_WARN("rank {}: flight recorder: the last {} ops are in {} (tools/trace/braid-trace "
                 "merges the ranks' dumps)",
                 rank, recorder.size(), path);
    }
  }
  // Tell the peers at once rather than letting them time out; "<code>|<message>".
  endpoint->signalAbort(comm::encodeAbortReason(e.code(), e.what()));
  failQueued(e);
}

void CommState::runBlocking(const OpDesc& desc) {
  std::unique_lock<std::mutex> lock(queueMutex);
  OpDesc d = issue(desc);
  if (queue.empty() && !busy && isPointToPoint(d.coll)) {
    // Through the queue, so that sends and recvs other threads post meanwhile join its group, but
    // run here at once: nothing to hand to the progress thread.
    auto op = enqueueLocked(d, false);
    Request request(op);
    runFront(lock, op.get());
    lock.unlock();
    request.wait();
    return;
  }
  if (queue.empty() && !busy && !openGroup) {
    busy = true;
    lock.unlock();
    struct Release {
      CommState* s;
      ~Release() {
        std::lock_guard<std::mutex> l(s->queueMutex);
        s->busy = false;
        if (s->waiters > 0) s->waitersCv.notify_all();
        if (!s->queue.empty() || s->openGroup) s->workerCv.notify_one();
      }
    } release{this};
    execute(d);
    opEnded(d, "");
    return;
  }
  Request request(enqueueLocked(d));
  lock.unlock();
  request.wait();
}

void CommState::runQueued(const std::shared_ptr<Request::Op>& op) {
  try {
    execute(op->desc, op->ticket);
    completeOp(*op, ErrorCode::kOk, "");
  } catch (const Error& e) {
    completeOp(*op, e.code(), e.what());
  } catch (const std::exception& e) {
    completeOp(*op, ErrorCode::kInternal,
               fmt::format("rank {}: internal error: {}", rank, e.what()));
  }
}

void CommState::runFront(std::unique_lock<std::mutex>& lock, const Request::Op* forOp) {
  busy = true;
  if (openGroup != nullptr || (callersRun && isPointToPoint(queue.front()->desc.coll))) {
    runP2pGroup(lock, forOp);
  } else {
    auto op = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    runQueued(op);
    lock.lock();
  }
  busy = false;
  if (waiters > 0) waitersCv.notify_all();  // a waiter may be waiting for this op or its turn
}

void CommState::helpUntilDone(const std::shared_ptr<Request::Op>& target, Deadline deadline) {
  auto isDone = [&] { return target->isDone(); };
  // An op run on this thread ends only when it completes or times out (its own timeout). A
  // caller whose deadline may come sooner (before now + that timeout) must get control back at
  // its deadline, so it runs nothing itself: the progress thread runs the queue and this caller
  // only waits, until its deadline.
  // Nor does it where callers never run ops (Medium::callersRun).
  const bool mayRun =
      callersRun &&
      (deadline.when() == Clock::time_point::max() ||
       deadline.when() >=
           Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(target->timeoutSeconds)));
  std::unique_lock<std::mutex> lock(queueMutex);
  if (!mayRun) {
    // The progress thread runs it, without its grace period: someone waits for it now.
    hurry = true;
    wakeWorkerLocked();
    workerCv.notify_one();
    return;
  }
  ++waiters;
  while (!isDone()) {
    if (!busy && (openGroup != nullptr || !queue.empty())) {
      // Not counted while it runs (busy keeps the progress thread back): runFront's wake-up is
      // for the other waiters only.
      --waiters;
      runFront(lock, target.get());
      ++waiters;
      continue;
    }
    if (deadline.expired()) break;
    auto slice = Clock::now() + std::chrono::milliseconds(100);
    waitersCv.wait_until(lock, std::min(slice, deadline.when()));
  }
  --waiters;
  // Ops left queued are the progress thread's again; it looks within a millisecond (waking it
  // here would let it race the next wait() for them).
}

Request CommState::submit(const OpDesc& desc) {
  std::unique_lock<std::mutex> lock(queueMutex);
  OpDesc d = issue(desc);
  return Request(enqueueLocked(d));
}

void CommState::submitTicketed(const OpDesc& desc, const std::function<uint64_t()>& admit) {
  std::optional<Error> failure;
  {
    std::unique_lock<std::mutex> lock(queueMutex);
    {
      std::lock_guard<std::mutex> errorLock(errorMutex);
      if (brokenLocked()) throw *broken;
    }
    if (aborted.load()) {
      fail(ErrorCode::kAborted, "rank {}: {}: the communicator was aborted", rank,
           collectiveName(desc.coll));
    }
    const OpDesc d = issue(desc);
    // Moves nothing; but allToAllv runs at count 0 (a rank that sends nothing may receive, and
    // every rank meets every other in its completion exchanges), as on the host path (runOp).
    if (d.count == 0 && d.coll != Collective::kAllToAllv) return;
    try {
      enqueueLocked(d, /*forProgressThread=*/true, admit());
      return;
    } catch (const Error& e) {
      failure = e;  // numbered but never queued: the communicator cannot go on
    }
  }
  breakOn(*failure);
  throw *failure;
}

const std::optional<Error>& CommState::brokenLocked() {
  if (!broken) {
    broken = medium->failureOutsideOps();
    if (broken) brokenSeen.store(true, std::memory_order_release);
  }
  return broken;
}

void CommState::wakeWorkerLocked() {
  if (!worker.joinable()) {
    worker = std::thread([this] { workerLoop(); });
  } else if (workerParked || !callersRun) {
    // Only a parked thread needs the (costly) wake-up, unless the progress thread runs every op.
    workerCv.notify_one();
  }
}

std::shared_ptr<Request::Op> CommState::reusableOpLocked() {
  // Ops are reused once nobody else holds them (their Request is gone and they left the queue):
  // an allocation, a mutex and a condition variable less per async call. The oldest first; a
  // use count of 1 read after every other owner's release (acq_rel) is acquired by the fence.
  // Up to as many as a bench keeps in flight (nccl-tests' non-blocking mode issues -n ops, then
  // waits for them all): below that, every op of such a batch was a fresh allocation.
  constexpr size_t kPoolOps = 4096;
  for (int look = 0; look < 2 && !opPool.empty(); ++look) {
    std::shared_ptr<Request::Op> op = std::move(opPool.front());
    opPool.pop_front();
    const bool free = op.use_count() == 1;
    opPool.push_back(op);  // in use: to the back, to be looked at again later
    if (!free) continue;
    std::atomic_thread_fence(std::memory_order_acquire);
    op->done.store(false, std::memory_order_relaxed);
    op->code = ErrorCode::kOk;
    op->message.clear();
    op->received = RecvResult{};
    return op;
  }
  auto op = std::make_shared<Request::Op>();
  op->state = self;
  if (opPool.size() < kPoolOps) opPool.push_back(op);
  return op;
}

std::shared_ptr<Request::Op> CommState::enqueueLocked(const OpDesc& d, bool forProgressThread,
                                                      uint64_t ticket) {
  auto op = reusableOpLocked();
  op->desc = d;
  op->ticket = ticket;
  op->timeoutSeconds = options.timeoutSeconds;
  queue.push_back(op);
  queuePushes.fetch_add(1, std::memory_order_relaxed);
  // A group that is running takes point-to-point ops posted meanwhile between its sweeps; its
  // runner may be asleep on the doorbell waiting for a peer (up to a 20 ms slice): wake it.
  if (busy && openGroup != nullptr && isPointToPoint(d.coll) && endpoint) endpoint->wake();
  if (!forProgressThread) return op;
  wakeWorkerLocked();
  return op;
}

void CommState::workerLoop() {
  // The progress thread runs queued ops nobody waits for, when comm/detail/progress_pace.h says
  // (a short grace, longer while the caller is still submitting). While ops come and go it polls
  // every millisecond instead of being woken per submit (a wake-up costs the submitting thread
  // tens of microseconds here); after kPark of quiet it parks and the next submit wakes it. Where
  // callers never run ops (the device), every submit wakes it, it runs ops at once and stays at
  // normal priority.
  const auto grace = callersRun ? std::chrono::microseconds(100) : std::chrono::microseconds(0);
  comm::ProgressPace pace(grace, std::chrono::milliseconds(1));
  constexpr auto kRecheck = std::chrono::milliseconds(1);
  constexpr auto kPark = std::chrono::milliseconds(50);
  // SCHED_IDLE while it only watches the queue: its polls never preempt the caller's thread, which
  // usually shares its core (mpirun binds a rank to one) and runs ops itself when it waits.
  medium->progressThreadStarted();
  setLogRank(rank);
  {
    std::lock_guard<std::mutex> started(queueMutex);
    workerStarted = true;
  }
  waitersCv.notify_all();
  sched_param param{};
  const int idlePolicy = callersRun ? SCHED_IDLE : SCHED_OTHER;
  sched_setscheduler(0, idlePolicy, &param);
  std::unique_lock<std::mutex> lock(queueMutex);
  auto lastWork = Clock::now();
  while (!stopping) {
    const auto now = Clock::now();
    if (queue.empty() && openGroup == nullptr) {
      hurry = false;
      if (now - lastWork >= kPark) {
        workerParked = true;
        workerCv.wait(lock);
        workerParked = false;
        lastWork = Clock::now();
      } else {
        workerCv.wait_for(lock, kRecheck);
      }
      continue;
    }
    lastWork = now;
    if (busy || waiters > 0) {
      workerCv.wait_for(lock, kRecheck);
      continue;
    }
    // When the front may run. A paused group: its waiter may be back in a moment (then it runs
    // the group itself).
    Clock::time_point due = now;
    if (!hurry && grace.count() > 0) {
      due = openGroup != nullptr
                ? groupPausedAt + grace
                : pace.due(now, queue.front().get(), queue.front()->desc.seq,
                           queuePushes.load(std::memory_order_relaxed));
    }
    if (now < due) {
      workerCv.wait_until(lock, due);
      continue;
    }
    // Run ops at normal priority (at SCHED_IDLE a busy machine would starve them while their
    // peers, and maybe a thread of ours that then waits, wait), in a row while nobody waits:
    // those queued now, and more while nobody submits. Two scheduler calls per batch, not per op.
    const uint64_t pushesBefore = queuePushes.load(std::memory_order_relaxed);
    size_t batch = queue.size();
    sched_setscheduler(0, SCHED_OTHER, &param);
    do {
      runFront(lock);
      if (batch > 0) --batch;
    } while (!stopping && !busy && waiters == 0 && (openGroup != nullptr || !queue.empty()) &&
             (hurry || batch > 0 || queuePushes.load(std::memory_order_relaxed) == pushesBefore));
    sched_setscheduler(0, idlePolicy, &param);
  }
}

void CommState::failQueued(const Error& cause) {
  // Every op queued behind a failure would fail the same way: end them all now, so a caller
  // waiting on many requests (a bench's hundreds in flight) is not kept waiting one by one.
  std::lock_guard<std::mutex> lock(queueMutex);
  for (auto& op : queue) {
    completeOp(*op, cause.code(),
               fmt::format("rank {}: {} #{} not started: the communicator failed before it: {}",
                           rank, collectiveName(op->desc.coll), op->desc.seq, cause.what()),
               false);
  }
  queue.clear();
  waitersCv.notify_all();
}

void CommState::abort(const std::string& why) {
  if (aborted.exchange(true)) return;
  if (endpoint) endpoint->signalAbort(comm::encodeAbortReason(ErrorCode::kAborted, why));
  std::lock_guard<std::mutex> lock(queueMutex);
  for (auto& op : queue) {
    completeOp(*op, ErrorCode::kAborted,
               fmt::format("rank {}: {} aborted before it started: {}", rank,
                           collectiveName(op->desc.coll), why),
               false);
  }
  queue.clear();
  failOpenGroup(fmt::format("rank {}: point-to-point op aborted: {}", rank, why));
  waitersCv.notify_all();
}

// ---- Communicator ----

Communicator::Communicator(std::shared_ptr<CommState> state) : state_(std::move(state)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

int Communicator::rank() const { return state_->rank; }
int Communicator::size() const { return state_->size; }

void Communicator::abort() { state_->abort(fmt::format("rank {} called abort()", state_->rank)); }

std::string Communicator::statusReport() const { return state_->statusReport(); }

Algorithm Communicator::chosenAlgorithm(Collective coll, size_t bytes,
                                        bool memAllocBuffers) const {
  if ((memAllocBuffers || state_->peersAreThreads()) && state_->mappedCopyCandidate(coll, bytes)) {
    return Algorithm::kSingleCopy;
  }
  if (state_->threadCopyCandidate(coll, bytes)) return Algorithm::kSingleCopy;
  return chosenAlgorithm(coll, bytes);
}

Algorithm Communicator::chosenAlgorithm(Collective coll, size_t bytes) const {
  if (coll == Collective::kSend || coll == Collective::kRecv || coll == Collective::kBarrier)
    return Algorithm::kOneShot;
  return comm::choose(state_->tunerConfig(), shapeOf(coll), bytes).family;
}

namespace {
OpDesc make(Collective coll, const void* in, void* out, size_t count, DataType type, RedOp op,
            int root, int tag = 0) {
  OpDesc d;
  d.tag = tag;
  d.coll = coll;
  d.input = in;
  d.output = out;
  d.count = count;
  d.dtype = type;
  d.op = op;
  d.root = root;
  return d;
}
}  // namespace

void Communicator::allReduce(const void* s, void* r, size_t n, DataType t, RedOp op) {
  state_->runBlocking(make(Collective::kAllReduce, s, r, n, t, op, -1));
}
void Communicator::reduceScatter(const void* s, void* r, size_t n, DataType t, RedOp op) {
  state_->runBlocking(make(Collective::kReduceScatter, s, r, n, t, op, -1));
}
void Communicator::allGather(const void* s, void* r, size_t n, DataType t) {
  state_->runBlocking(make(Collective::kAllGather, s, r, n, t, RedOp::kSum, -1));
}
void Communicator::broadcast(const void* s, void* r, size_t n, DataType t, int root) {
  state_->runBlocking(make(Collective::kBroadcast, s, r, n, t, RedOp::kSum, root));
}
void Communicator::reduce(const void* s, void* r, size_t n, DataType t, RedOp op, int root) {
  state_->runBlocking(make(Collective::kReduce, s, r, n, t, op, root));
}
void Communicator::allToAll(const void* s, void* r, size_t n, DataType t) {
  state_->runBlocking(make(Collective::kAllToAll, s, r, n, t, RedOp::kSum, -1));
}
void Communicator::allToAllv(const void* s, const size_t* sc, const size_t* sd, void* r,
                             const size_t* rc, const size_t* rd, DataType t) {
  state_->runBlocking(comm::allToAllvOp(s, sc, sd, r, rc, rd, t, rank(), size()));
}
void Communicator::gather(const void* s, void* r, size_t n, DataType t, int root) {
  state_->runBlocking(make(Collective::kGather, s, r, n, t, RedOp::kSum, root));
}
void Communicator::scatter(const void* s, void* r, size_t n, DataType t, int root) {
  state_->runBlocking(make(Collective::kScatter, s, r, n, t, RedOp::kSum, root));
}
void Communicator::send(const void* b, size_t n, DataType t, int peer, int tag) {
  state_->runBlocking(make(Collective::kSend, b, nullptr, n, t, RedOp::kSum, peer, tag));
}
void Communicator::recv(void* b, size_t n, DataType t, int peer, int tag) {
  state_->runBlocking(make(Collective::kRecv, nullptr, b, n, t, RedOp::kSum, peer, tag));
}
void Communicator::barrier() {
  state_->runBlocking(
      make(Collective::kBarrier, nullptr, nullptr, 0, DataType::kUint8, RedOp::kMax, -1));
}

Request Communicator::allReduceAsync(const void* s, void* r, size_t n, DataType t, RedOp op) {
  return state_->submit(make(Collective::kAllReduce, s, r, n, t, op, -1));
}
Request Communicator::reduceScatterAsync(const void* s, void* r, size_t n, DataType t, RedOp op) {
  return state_->submit(make(Collective::kReduceScatter, s, r, n, t, op, -1));
}
Request Communicator::allGatherAsync(const void* s, void* r, size_t n, DataType t) {
  return state_->submit(make(Collective::kAllGather, s, r, n, t, RedOp::kSum, -1));
}
Request Communicator::broadcastAsync(const void* s, void* r, size_t n, DataType t, int root) {
  return state_->submit(make(Collective::kBroadcast, s, r, n, t, RedOp::kSum, root));
}
Request Communicator::reduceAsync(const void* s, void* r, size_t n, DataType t, RedOp op,
                                  int root) {
  return state_->submit(make(Collective::kReduce, s, r, n, t, op, root));
}
Request Communicator::allToAllAsync(const void* s, void* r, size_t n, DataType t) {
  return state_->submit(make(Collective::kAllToAll, s, r, n, t, RedOp::kSum, -1));
}
Request Communicator::allToAllvAsync(const void* s, const size_t* sc, const size_t* sd, void* r,
                                     const size_t* rc, const size_t* rd, DataType t) {
  return state_->submit(comm::allToAllvOp(s, sc, sd, r, rc, rd, t, rank(), size()));
}
Request Communicator::gatherAsync(const void* s, void* r, size_t n, DataType t, int root) {
  return state_->submit(make(Collective::kGather, s, r, n, t, RedOp::kSum, root));
}
Request Communicator::scatterAsync(const void* s, void* r, size_t n, DataType t, int root) {
  return state_->submit(make(Collective::kScatter, s, r, n, t, RedOp::kSum, root));
}
Request Communicator::sendAsync(const void* b, size_t n, DataType t, int peer, int tag) {
  return state_->submit(make(Collective::kSend, b, nullptr, n, t, RedOp::kSum, peer, tag));
}
Request Communicator::recvAsync(void* b, size_t n, DataType t, int peer, int tag) {
  return state_->submit(make(Collective::kRecv, nullptr, b, n, t, RedOp::kSum, peer, tag));
}
Request Communicator::recvAnySourceAsync(void* b, size_t n, DataType t, int tag) {
  OpDesc d = make(Collective::kRecv, nullptr, b, n, t, RedOp::kSum, -1, tag);
  d.anySource = true;
  return state_->submit(d);
}
RecvResult Communicator::recvAnySource(void* b, size_t n, DataType t, int tag) {
  // Through a request (the waiting caller runs it): the result lives on its op.
  Request request = recvAnySourceAsync(b, n, t, tag);
  request.wait();
  return request.received();
}
Request Communicator::barrierAsync() {
  return state_->submit(
      make(Collective::kBarrier, nullptr, nullptr, 0, DataType::kUint8, RedOp::kMax, -1));
}

// ---- Request ----

Request::Request() = default;
Request::Request(std::shared_ptr<Op> op) : op_(std::move(op)) {}
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (op_) {
      try {
        wait(Deadline::after(op_->timeoutSeconds * 2 + 1));
      } catch (...) {
      }
    }
    op_ = std::move(other.op_);
  }
  return *this;
}

bool Request::Op::sleepUntilDone(Clock::time_point until) {
  if (isDone()) return true;
  std::unique_lock<std::mutex> lock(mutex);
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  while (!done.load(std::memory_order_seq_cst)) {
    if (until == Clock::time_point::max()) {
      doneCv.wait(lock);
    } else if (doneCv.wait_until(lock, until) == std::cv_status::timeout) {
      break;
    }
  }
  sleepers.fetch_sub(1, std::memory_order_relaxed);
  return isDone();
}

Request::~Request() {
  if (!op_ || op_->isDone()) return;
  // Never let the caller free buffers an op still uses; bounded by the op's own timeout.
  op_->sleepUntilDone(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(op_->timeoutSeconds * 2 + 1)));
}

bool Request::test() { return !op_ || op_->isDone(); }

void Request::wait(Deadline deadline) {
  BRAID_ENFORCE(op_ != nullptr, ErrorCode::kInvalidUsage, "wait() on an empty Request");
  if (!op_->isDone()) {
    if (auto state = op_->state.lock()) state->helpUntilDone(op_, deadline);
  }
  if (!op_->sleepUntilDone(deadline.when())) {
    fail(ErrorCode::kTimeout, "{} #{} of {} elements: not finished by the wait() deadline",
         collectiveName(op_->desc.coll), op_->desc.seq, op_->desc.count);
  }
  if (op_->code != ErrorCode::kOk) throw Error(op_->code, op_->message);
}

ErrorCode Request::status() const {
  if (!op_) return ErrorCode::kOk;
  return op_->isDone() ? op_->code : ErrorCode::kOk;
}

RecvResult Request::received() const {
  BRAID_ENFORCE(op_ != nullptr && op_->desc.coll == Collective::kRecv, ErrorCode::kInvalidUsage,
                "received() on a Request that is no receive");
  const OpDesc& d = op_->desc;
  BRAID_ENFORCE(op_->isDone() && op_->code == ErrorCode::kOk, ErrorCode::kInvalidUsage,
                "received() on recv #{} of {} elements before it finished well", d.seq, d.count);
  if (d.anySource) return op_->received;
  return RecvResult{d.root, d.count * dataTypeSize(d.dtype)};
}

}  // namespace braid
