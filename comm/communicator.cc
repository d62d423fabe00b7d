// Communicator calls: validation, numbering, the op queue and its progress thread, execution.
#include <fmt/format.h>
#include <sched.h>

#include <cstring>

#include "comm/bootstrap/server.h"
#include "comm/op_rules.h"
#include "comm/state.h"
#include "common/log.h"

namespace braid {
namespace {

using comm::bufferCounts;
using comm::overlaps;
using comm::shapeOf;

}  // namespace

CommState::CommState(int r, int n, const ResolvedOptions& o)
    : rank(r), size(n), options(o), sendSeq(n, 0), recvSeq(n, 0) {}

void CommState::completeOp(Request::Op& op, ErrorCode code, std::string message) {
  {
    std::lock_guard<std::mutex> opLock(op.mutex);
    op.done = true;
    op.code = code;
    op.message = std::move(message);
  }
  op.doneCv.notify_all();
}

CommState::~CommState() {
  {
    std::lock_guard<std::mutex> lock(queueMutex);
    stopping = true;
    for (auto& op : queue) {
      completeOp(*op, ErrorCode::kAborted,
                 fmt::format("rank {}: {} was still queued when the communicator was destroyed",
                             rank, collectiveName(op->desc.coll)));
    }
    queue.clear();
  }
  waitersCv.notify_all();
  workerCv.notify_all();
  if (worker.joinable()) worker.join();
  // The transport first (its destructor hands over or flushes what this rank posted), then the
  // store this rank may host, once the ranks still connecting are done with it.
  const bool connected = endpoint != nullptr;
  executor.reset();
  endpoint.reset();
  closeRendezvous(*this, connected);
}

comm::TunerConfig CommState::tunerConfig() const {
  comm::TunerConfig config;
  config.nranks = size;
  config.slotBytes = options.slotBytes;
  config.slots = options.slots;
  config.channels = options.channels;
  config.forced = options.algorithm;
  config.model = tunerModel;
  return config;
}

OpDesc CommState::issue(OpDesc d) {
  const char* name = collectiveName(d.coll);
  BRAID_ENFORCE(isValid(d.dtype), ErrorCode::kInvalidUsage, "rank {}: {}: unknown data type {}",
                rank, name, int(d.dtype));
  if (reduces(d.coll)) {
    BRAID_ENFORCE(isValid(d.op), ErrorCode::kInvalidUsage, "rank {}: {}: unknown reduction op {}",
                  rank, name, int(d.op));
  }
  const size_t elem = dataTypeSize(d.dtype);
  size_t inCount, outCount, inBytes, outBytes;
  bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  BRAID_ENFORCE(!__builtin_mul_overflow(d.count, size_t(size), &inBytes) &&
                    !__builtin_mul_overflow(inCount, elem, &inBytes) &&
                    !__builtin_mul_overflow(outCount, elem, &outBytes) &&
                    inBytes < (size_t(1) << 62),
                ErrorCode::kInvalidUsage, "rank {}: {}: count {} of {} overflows the byte size",
                rank, name, d.count, dataTypeName(d.dtype));
  const bool rooted = d.coll == Collective::kBroadcast || d.coll == Collective::kReduce;
  const bool p2p = d.coll == Collective::kSend || d.coll == Collective::kRecv;
  if (rooted) {
    BRAID_ENFORCE(d.root >= 0 && d.root < size, ErrorCode::kInvalidUsage,
                  "rank {}: {}: root {} is outside 0..{}", rank, name, d.root, size - 1);
  }
  if (p2p) {
    BRAID_ENFORCE(d.root >= 0 && d.root < size && d.root != rank, ErrorCode::kInvalidUsage,
                  "rank {}: {}: peer {} must be another rank in 0..{}", rank, name, d.root,
                  size - 1);
  }
  if (d.count > 0) {
    // Which buffers this rank reads and writes.
    bool readsIn =
        d.coll != Collective::kRecv && (d.coll != Collective::kBroadcast || rank == d.root);
    bool writesOut =
        d.coll != Collective::kSend && (d.coll != Collective::kReduce || rank == d.root);
    BRAID_ENFORCE(!readsIn || d.input != nullptr, ErrorCode::kInvalidUsage,
                  "rank {}: {} of {} x {}: the send buffer is null", rank, name, d.count,
                  dataTypeName(d.dtype));
    BRAID_ENFORCE(!writesOut || d.output != nullptr, ErrorCode::kInvalidUsage,
                  "rank {}: {} of {} x {}: the receive buffer is null", rank, name, d.count,
                  dataTypeName(d.dtype));
    if (readsIn && writesOut && !p2p &&
        !comm::isInPlace(d.coll, d.input, d.output, d.count, rank, elem)) {
      BRAID_ENFORCE(!overlaps(d.input, inBytes, d.output, outBytes), ErrorCode::kInvalidUsage,
                    "rank {}: {} of {} bytes: send and receive buffers overlap without being "
                    "in-place",
                    rank, name, inBytes);
    }
  }
  // Numbered in the order ops will execute (the caller holds queueMutex).
  d.collectivesBefore = collSeq;
  if (d.coll == Collective::kSend) {
    d.seq = sendSeq[d.root]++;
  } else if (d.coll == Collective::kRecv) {
    d.seq = recvSeq[d.root]++;
  } else {
    d.seq = collSeq++;
  }
  return d;
}

std::shared_ptr<const comm::RankProgram> CommState::program(const comm::ScheduleSpec& spec) {
  ProgramKey key{int(spec.shape), int(spec.family), spec.count,        spec.root,
                 spec.lanes,      spec.inPlace,     spec.elemsPerPiece};
  auto it = programs.find(key);
  if (it != programs.end()) return it->second;
  if (programs.size() >= 256) programs.clear();
  auto built = std::make_shared<const comm::RankProgram>(comm::buildProgram(spec, rank));
  programs.emplace(key, built);
  return built;
}

void CommState::execute(const OpDesc& d) {
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (broken) throw *broken;
  }
  if (aborted.load()) {
    fail(ErrorCode::kAborted, "rank {}: {}: the communicator was aborted", rank,
         collectiveName(d.coll));
  }
  if (d.count == 0 && d.coll != Collective::kBarrier) return;

  const size_t elem = dataTypeSize(d.dtype);
  comm::ExecArgs args;
  args.input = d.input;
  args.output = d.output;
  args.dtype = d.dtype;
  args.op = d.op;
  args.timeoutSeconds = options.timeoutSeconds;
  args.elemsPerPiece = options.slotBytes / elem;
  args.called = d.coll;
  args.collectivesBefore = d.collectivesBefore;
  args.header.seq = d.seq;
  args.header.coll = d.coll;
  args.header.dtype = d.dtype;
  args.header.op = reduces(d.coll) ? d.op : RedOp::kSum;
  args.header.count = d.count;
  args.header.pieceBytes = static_cast<uint32_t>(options.slotBytes);
  size_t inCount, outCount;
  bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  args.streamOutput = outCount * elem >= options.streamBytes;

  std::shared_ptr<const comm::RankProgram> prog;
  comm::RankProgram p2pProgram;
  if (d.coll == Collective::kSend || d.coll == Collective::kRecv) {
    // Point-to-point: one step on channel 0; the header says "send" on both sides.
    comm::Step step;
    step.prim = d.coll == Collective::kSend ? comm::Prim::kSend : comm::Prim::kRecv;
    (d.coll == Collective::kSend ? step.sendPeer : step.recvPeer) = d.root;
    step.src = {comm::Buf::kInput, 0};
    step.dst = {comm::Buf::kOutput, 0};
    step.count = d.count;
    p2pProgram.lanes.push_back(comm::Lane{{step}});
    args.header.coll = Collective::kSend;
    args.header.family = Algorithm::kOneShot;
    args.header.root = -1;
  } else {
    comm::ScheduleSpec spec;
    spec.nranks = size;
    spec.count = d.count;
    spec.elemsPerPiece = args.elemsPerPiece;
    spec.nodeOf = nodeOf;
    if (d.coll == Collective::kBarrier) {
      spec.shape = Collective::kAllReduce;
      spec.family = Algorithm::kOneShot;
      spec.count = 1;
      args.input = &barrierIn;
      args.output = &barrierOut;
      args.dtype = DataType::kUint8;
      args.op = RedOp::kMax;
      args.elemsPerPiece = options.slotBytes;
      spec.elemsPerPiece = args.elemsPerPiece;
      args.header.dtype = DataType::kUint8;
      args.header.count = 0;
    } else {
      spec.shape = shapeOf(d.coll);
      comm::Choice choice = comm::choose(tunerConfig(), spec.shape, inCount * elem);
      spec.family = choice.family;
      spec.lanes = choice.lanes;
      spec.root = std::max(d.root, 0);
      spec.inPlace = comm::isInPlace(d.coll, d.input, d.output, d.count, rank, elem);
      BRAID_ENFORCE(comm::channelsUsed(spec.family, spec.lanes) <= endpoint->channels(),
                    ErrorCode::kInvalidUsage,
                    "rank {}: {} of {} bytes: algorithm '{}' needs {} channels per peer, the "
                    "communicator has {} (it opens two for BRAID_ALGO=auto or tree)",
                    rank, collectiveName(d.coll), inCount * elem, algorithmName(spec.family),
                    comm::channelsUsed(spec.family, spec.lanes), endpoint->channels());
    }
    args.header.family = spec.family;
    args.header.root =
        (d.coll == Collective::kBroadcast || d.coll == Collective::kReduce) ? d.root : -1;
    prog = program(spec);
  }

  try {
    executor->run(prog ? *prog : p2pProgram, args);
    if (comm::needsCompletionExchange(d.coll) && size > 1) {
      // Every rank confirms to every other with this op's header (a one-byte direct exchange),
      // so no rank reports success for a call another rank disagreed with (op_rules.h).
      comm::ScheduleSpec fin;
      fin.nranks = size;
      fin.shape = Collective::kAllReduce;
      fin.family = Algorithm::kOneShot;
      fin.count = 1;
      fin.elemsPerPiece = options.slotBytes;
      fin.nodeOf = nodeOf;
      comm::ExecArgs finArgs = args;
      finArgs.input = &barrierIn;
      finArgs.output = &barrierOut;
      finArgs.dtype = DataType::kUint8;
      finArgs.op = RedOp::kMax;
      finArgs.elemsPerPiece = options.slotBytes;
      finArgs.streamOutput = false;
      executor->run(*program(fin), finArgs);
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidUsage) {
      {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!broken) broken = e;
      }
      // Tell the peers at once rather than letting them time out; "<code>|<message>".
      endpoint->signalAbort(comm::encodeAbortReason(e.code(), e.what()));
      failQueued(e);
    }
    throw;
  }
}

void CommState::runBlocking(const OpDesc& desc) {
  std::unique_lock<std::mutex> lock(queueMutex);
  OpDesc d = issue(desc);
  if (queue.empty() && !busy) {
    busy = true;
    lock.unlock();
    struct Release {
      CommState* s;
      ~Release() {
        std::lock_guard<std::mutex> l(s->queueMutex);
        s->busy = false;
        if (s->waiters > 0) s->waitersCv.notify_all();
        if (!s->queue.empty()) s->workerCv.notify_one();
      }
    } release{this};
    execute(d);
    return;
  }
  Request request(enqueueLocked(d));
  lock.unlock();
  request.wait();
}

void CommState::runQueued(const std::shared_ptr<Request::Op>& op) {
  try {
    execute(op->desc);
    completeOp(*op, ErrorCode::kOk, "");
  } catch (const Error& e) {
    completeOp(*op, e.code(), e.what());
  } catch (const std::exception& e) {
    completeOp(*op, ErrorCode::kInternal,
               fmt::format("rank {}: internal error: {}", rank, e.what()));
  }
}

void CommState::runFront(std::unique_lock<std::mutex>& lock) {
  auto op = queue.front();
  queue.pop_front();
  busy = true;
  lock.unlock();
  runQueued(op);
  lock.lock();
  busy = false;
  if (waiters > 0) waitersCv.notify_all();  // a waiter may be waiting for this op or its turn
}

void CommState::helpUntilDone(const std::shared_ptr<Request::Op>& target, Deadline deadline) {
  auto isDone = [&] {
    std::lock_guard<std::mutex> opLock(target->mutex);
    return target->done;
  };
  std::unique_lock<std::mutex> lock(queueMutex);
  ++waiters;
  while (!isDone()) {
    if (!busy && !queue.empty()) {
      runFront(lock);
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

std::shared_ptr<Request::Op> CommState::enqueueLocked(const OpDesc& d) {
  auto op = std::make_shared<Request::Op>();
  op->desc = d;
  op->timeoutSeconds = options.timeoutSeconds;
  op->state = self;
  op->submitted = Clock::now();
  queue.push_back(op);
  if (!worker.joinable()) {
    worker = std::thread([this] { workerLoop(); });
  } else if (workerParked) {
    workerCv.notify_one();  // only a parked thread needs the (costly) wake-up
  }
  return op;
}

void CommState::workerLoop() {
  // The progress thread runs queued ops nobody waits for. It leaves a fresh op alone for a short
  // grace period, because a caller that submits and then waits runs it cheaper itself. While ops
  // come and go it polls every millisecond instead of being woken per submit (a wake-up costs
  // the submitting thread tens of microseconds here); after kPark of quiet it parks and the next
  // submit wakes it.
  constexpr auto kGrace = std::chrono::microseconds(100);
  constexpr auto kRecheck = std::chrono::milliseconds(1);
  constexpr auto kPark = std::chrono::milliseconds(50);
  // SCHED_IDLE while it only watches the queue: its polls never preempt the caller's thread, which
  // usually shares its core (mpirun binds a rank to one) and runs ops itself when it waits.
  sched_param param{};
  sched_setscheduler(0, SCHED_IDLE, &param);
  std::unique_lock<std::mutex> lock(queueMutex);
  auto lastWork = Clock::now();
  while (!stopping) {
    const auto now = Clock::now();
    if (queue.empty()) {
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
    const auto due = queue.front()->submitted + kGrace;
    if (now < due) {
      workerCv.wait_until(lock, due);
      continue;
    }
    // Run the op at normal priority: at SCHED_IDLE a busy machine would starve it while its
    // peers (and maybe a thread of ours that then waits for it) wait.
    sched_setscheduler(0, SCHED_OTHER, &param);
    runFront(lock);
    sched_setscheduler(0, SCHED_IDLE, &param);
  }
}

void CommState::failQueued(const Error& cause) {
  // Every op queued behind a failure would fail the same way: end them all now, so a caller
  // waiting on many requests (a bench's hundreds in flight) is not kept waiting one by one.
  std::lock_guard<std::mutex> lock(queueMutex);
  for (auto& op : queue) {
    completeOp(*op, cause.code(),
               fmt::format("rank {}: {} #{} not started: the communicator failed before it: {}",
                           rank, collectiveName(op->desc.coll), op->desc.seq, cause.what()));
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
                           collectiveName(op->desc.coll), why));
  }
  queue.clear();
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

Algorithm Communicator::chosenAlgorithm(Collective coll, size_t bytes) const {
  if (coll == Collective::kSend || coll == Collective::kRecv || coll == Collective::kBarrier)
    return Algorithm::kOneShot;
  return comm::choose(state_->tunerConfig(), shapeOf(coll), bytes).family;
}

namespace {
OpDesc make(Collective coll, const void* in, void* out, size_t count, DataType type, RedOp op,
            int root) {
  OpDesc d;
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
void Communicator::send(const void* b, size_t n, DataType t, int peer) {
  state_->runBlocking(make(Collective::kSend, b, nullptr, n, t, RedOp::kSum, peer));
}
void Communicator::recv(void* b, size_t n, DataType t, int peer) {
  state_->runBlocking(make(Collective::kRecv, nullptr, b, n, t, RedOp::kSum, peer));
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
Request Communicator::sendAsync(const void* b, size_t n, DataType t, int peer) {
  return state_->submit(make(Collective::kSend, b, nullptr, n, t, RedOp::kSum, peer));
}
Request Communicator::recvAsync(void* b, size_t n, DataType t, int peer) {
  return state_->submit(make(Collective::kRecv, nullptr, b, n, t, RedOp::kSum, peer));
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

Request::~Request() {
  if (!op_) return;
  // Never let the caller free buffers an op still uses; bounded by the op's own timeout.
  std::unique_lock<std::mutex> lock(op_->mutex);
  op_->doneCv.wait_for(lock, std::chrono::duration<double>(op_->timeoutSeconds * 2 + 1),
                       [&] { return op_->done; });
}

bool Request::test() {
  if (!op_) return true;
  std::lock_guard<std::mutex> lock(op_->mutex);
  return op_->done;
}

void Request::wait(Deadline deadline) {
  BRAID_ENFORCE(op_ != nullptr, ErrorCode::kInvalidUsage, "wait() on an empty Request");
  if (!test()) {
    if (auto state = op_->state.lock()) state->helpUntilDone(op_, deadline);
  }
  std::unique_lock<std::mutex> lock(op_->mutex);
  while (!op_->done) {
    if (deadline.when() == Clock::time_point::max()) {
      op_->doneCv.wait(lock);
    } else if (op_->doneCv.wait_until(lock, deadline.when()) == std::cv_status::timeout &&
               !op_->done) {
      fail(ErrorCode::kTimeout, "{} #{} of {} elements: not finished by the wait() deadline",
           collectiveName(op_->desc.coll), op_->desc.seq, op_->desc.count);
    }
  }
  if (op_->code != ErrorCode::kOk) throw Error(op_->code, op_->message);
}

ErrorCode Request::status() const {
  if (!op_) return ErrorCode::kOk;
  std::lock_guard<std::mutex> lock(op_->mutex);
  return op_->done ? op_->code : ErrorCode::kOk;
}

}  // namespace braid
