#include "comm/engine/program_runner.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/env.h"
#include "common/log.h"

namespace braid::comm {
namespace {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Idle policy, for the first active window of a wait (BRAID_SPIN_US; with ranks outnumbering
// cores shorter while waits outlast it: comm/engine/active_window.h):
// - ranks on this machine outnumber the cores they run on: yield at once and again (the peer we
//   wait for is often runnable but not running, and sched_yield hands it the core);
// - otherwise: spin (the peer runs on its own core; yielding would hand our core to an unrelated
//   process for a whole time slice on a busy machine).
// Then sleep on the doorbell in short slices, so abort and dead peers are noticed within ~20 ms
// and a long wait costs no CPU.
constexpr int kSpinRounds = 256;
constexpr int kOversubscribedSpinRounds = 8;
const Clock::duration kActiveWait = std::chrono::microseconds(envInt("BRAID_SPIN_US", 2000));
constexpr auto kSleepSlice = std::chrono::milliseconds(20);
constexpr auto kPeerCheckEvery = std::chrono::milliseconds(50);

}  // namespace

ProgramRunner::ProgramRunner(transport::Endpoint& endpoint, const std::atomic<bool>& aborted,
                             bool oversubscribed, PieceEngine& engine)
    : ep_(endpoint),
      aborted_(aborted),
      engine_(engine),
      rank_(endpoint.rank()),
      size_(endpoint.size()),
      oversubscribed_(oversubscribed),
      deferred_(engine.deferred()),
      activeWindow_(kActiveWait, /*adapts=*/oversubscribed) {
  gatherSrcs_.resize(size_);
  sentTo_ = std::make_unique<std::atomic<uint64_t>[]>(size_);
  receivedFrom_ = std::make_unique<std::atomic<uint64_t>[]>(size_);
  recvsFrom_.assign(size_, 0);
  recvOwner_.assign(size_, kNoLane);
  spinRounds_ = oversubscribed ? kOversubscribedSpinRounds : kSpinRounds;
}

char* ProgramRunner::address(Buf buf, size_t elemOffset, const Cursor& c) const {
  char* base = buf == Buf::kInput ? const_cast<char*>(static_cast<const char*>(c.args->input))
                                  : static_cast<char*>(c.args->output);
  return base + elemOffset * c.elemSize;
}

std::string ProgramRunner::what(const ExecArgs& args) const {
  OpHeader called = args.header;
  called.coll = args.called;
  const size_t bytes = args.describedBytes != SIZE_MAX
                           ? args.describedBytes
                           : args.header.count * dataTypeSize(args.dtype);
  if (args.anySource) {
    return fmt::format("recv from any source #{} (tag {}, up to {} x {}) of {} bytes{}",
                       args.header.seq, args.header.tag, args.header.count,
                       dataTypeName(args.dtype), bytes, engine_.where());
  }
  return fmt::format("{} of {} bytes{}", describeHeader(called), bytes, engine_.where());
}

void ProgramRunner::checkHeader(const transport::MessageMeta& meta, size_t bytes,
                                size_t expectBytes, int peer, const Cursor& c) {
  const ExecArgs& args = *c.args;
  // Compared as encoded words (encoded once per lane); decoded only to describe a mismatch.
  if (std::memcmp(meta.words, c.meta.words, sizeof meta.words) != 0) {
    OpHeader got = decodeHeader(meta);
    engine_.abandon();  // pieces of other lanes may be in flight (deferred engines)
    pending_.clear();
    fail(ErrorCode::kMismatch,
         "rank {}: {}: collective mismatch with peer rank {}: this rank called {}, peer rank {} "
         "called {}",
         rank_, what(args), peer, describeHeader(decodeHeader(c.meta)), peer, describeHeader(got));
  }
  if (bytes != expectBytes) {
    engine_.abandon();
    pending_.clear();
    fail(ErrorCode::kMismatch,
         "rank {}: {}: message of {} bytes from peer rank {} where {} bytes were expected", rank_,
         what(args), bytes, peer, expectBytes);
  }
}

const void* ProgramRunner::peekData(int peer, int channel, size_t* bytes,
                                    transport::MessageMeta* meta, const ExecArgs& args) {
  transport::RecvChannel& ch = ep_.recv(peer, channel);
  for (;;) {
    const void* p = ch.tryPeek(bytes, meta);
    if (p == nullptr || !isProbe(*meta)) return p;
    if (!dropProbe(peer, channel, *meta, args)) return nullptr;
  }
}

bool ProgramRunner::dropProbe(int peer, int channel, const transport::MessageMeta& meta,
                              const ExecArgs& args) {
  const uint64_t seq = meta.words[0], mine = expectedMeta_.words[0];
  if (args.header.coll == Collective::kSend) {
    // Point-to-point numbers are another count: a probe of a collective issued after this op is
    // left to it (issue order is the same on every rank); an earlier one's is stale.
    if (seq >= args.collectivesBefore) return false;
    ep_.recv(peer, channel).release();
    return true;
  }
  if (seq > mine) return false;  // the peer is waiting in a later op; ours to judge then
  if (seq == mine &&
      (meta.words[1] != expectedMeta_.words[1] || meta.words[2] != expectedMeta_.words[2] ||
       (meta.words[3] & ~kProbeBit) != expectedMeta_.words[3])) {
    failWaiting(
        ErrorCode::kMismatch, args,
        fmt::format("collective mismatch with peer rank {}: this rank called {}, peer "
                    "rank {} waits in {}",
                    peer, describeHeader(args.header), peer, describeHeader(decodeHeader(meta))));
  }
  ep_.recv(peer, channel).release();  // stale (an op that ended), or this op and agreeing
  return true;
}

void ProgramRunner::sendProbes(const ExecArgs& args) {
  probed_ = true;
  if (args.header.coll == Collective::kSend) return;  // p2p waits are the user's to order
  const transport::MessageMeta probe = probeOf(expectedMeta_);
  // A channel this rank still sends on in this run carries its header to the peer anyway, and a
  // probe there would hold one of the slots that sending needs until the peer reads it (with
  // BRAID_SLOTS=2 a schedule's one-slot-ahead rounds could then stall): probe the others only.
  auto sendsLater = [&](int peer, int channel) {
    for (const Cursor& c : cursors_) {
      if (c.done()) continue;
      for (size_t i = c.step; i < c.lane->steps.size(); ++i) {
        const Step& s = c.lane->steps[i];
        if (s.channel == channel && primSends(s.prim) && s.sendPeer == peer) return true;
      }
    }
    return false;
  };
  auto probeOne = [&](int peer, int channel) {
    if (sendsLater(peer, channel)) return;
    transport::SendChannel& ch = ep_.send(peer, channel);
    if (ch.tryAcquire() != nullptr) ch.post(0, probe);
  };
  for (const Cursor& c : cursors_) {
    if (c.done()) continue;
    const Step& s = c.lane->steps[c.step];
    if (s.prim == Prim::kGatherReduce) {
      for (int q = 0; q < size_; ++q)
        if (q != rank_) probeOne(q, s.channel);
    } else if (primReceives(s.prim)) {
      probeOne(s.recvPeer, s.channel);
    }
  }
}

bool ProgramRunner::earlierClaims(const Cursor& c, int peer,
                                  const transport::MessageMeta& meta) const {
  const OpHeader head = decodeHeader(meta);
  for (const Cursor& d : cursors_) {
    if (d.index >= c.index) break;  // in admission (posting) order
    if (d.done() || !d.p2pRecv || d.started) continue;
    if (d.anySource ? head.coll == Collective::kSend && head.tag == d.args->header.tag
                    : d.lane->steps[d.step].recvPeer == peer) {
      return true;
    }
  }
  return false;
}

int ProgramRunner::matchAnySource(const Cursor& c, size_t* bytes, transport::MessageMeta* meta) {
  const int channel = c.lane->steps[c.step].channel;
  for (int i = 0; i < size_; ++i) {
    const int q = (anyNext_ + i) % size_;
    if (q == rank_ || recvOwner_[q] != kNoLane) continue;  // a started recv reads q's stream
    if (peekData(q, channel, bytes, meta, *c.args) == nullptr) continue;
    const OpHeader head = decodeHeader(*meta);
    if (head.coll != Collective::kSend || head.tag != c.args->header.tag) continue;
    if (earlierClaims(c, q, *meta)) continue;
    anyNext_ = (q + 1) % size_;  // the others first next time: no peer starves the rest
    return q;
  }
  return -1;
}

bool ProgramRunner::startRecv(Cursor& c) {
  const Step& s = c.lane->steps[c.step];
  const ExecArgs& args = *c.args;
  size_t got = 0;
  transport::MessageMeta meta;
  int peer = s.recvPeer;
  if (c.anySource) {
    peer = matchAnySource(c, &got, &meta);
    if (peer < 0) return false;
    const uint64_t count = meta.words[2];
    if (meta.words[1] == c.meta.words[1] && count > s.count) {
      engine_.abandon();
      pending_.clear();
      const size_t elem = dataTypeSize(args.dtype);
      fail(ErrorCode::kMismatch,
           "rank {}: {}: the message from peer rank {} holds {} x {} ({} bytes), more than the "
           "buffer's {} elements ({} bytes)",
           rank_, what(args), peer, count, dataTypeName(args.dtype), count * elem, s.count,
           s.count * elem);
    }
    c.matched = s;
    c.matched.recvPeer = peer;
    c.matched.count = count;
    c.meta.words[2] = count;  // a smaller message fills the front of the buffer
    --unmatchedAny_;
  } else {
    // Not while a recv from any source that matched this peer reads its stream, nor when an
    // earlier posted one from any source has the first claim on the peer's next message.
    if (recvOwner_[peer] != kNoLane) return false;
    if (unmatchedAny_ > 0 &&
        (peekData(peer, s.channel, &got, &meta, args) == nullptr || earlierClaims(c, peer, meta))) {
      return false;
    }
  }
  c.meta.words[0] = recvsFrom_[peer]++;  // the n-th recv from a peer meets its n-th send
  c.started = true;
  c.from = peer;
  recvOwner_[peer] = c.index;
  if (c.anySource && feed_ != nullptr) feed_->matched(c.index, peer, c.matched.count);
  return true;
}

bool ProgramRunner::tryPiece(Cursor& c) {
  if (waitsForEarlier(c)) return false;  // its turn on this peer and direction comes later
  if (c.p2pRecv && !c.started && !startRecv(c)) return false;
  const ExecArgs& args = *c.args;
  const Step& s = stepOf(c);
  if (s.count == 0 && !s.emptyMessage) {
    c.step++;
    return true;
  }
  const size_t per = args.elemsPerPiece;
  const size_t begin = c.piece * per;
  const size_t len = std::min(per, s.count - begin);
  const size_t bytes = len * c.elemSize;

  // Everything this piece needs must be there before anything is touched.
  const void* slot = nullptr;
  transport::RecvChannel* in = nullptr;
  if (s.prim == Prim::kGatherReduce) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      size_t got = 0;
      transport::MessageMeta meta;
      const void* p = peekData(q, s.channel, &got, &meta, args);
      if (p == nullptr) return false;
      checkHeader(meta, got, bytes, q, c);
      gatherSrcs_[q] = p;
    }
  } else if (primReceives(s.prim)) {
    in = &ep_.recv(s.recvPeer, s.channel);
    size_t got = 0;
    transport::MessageMeta meta;
    slot = peekData(s.recvPeer, s.channel, &got, &meta, args);
    if (slot == nullptr) return false;
    checkHeader(meta, got, bytes, s.recvPeer, c);
  }
  transport::SendChannel* outCh = nullptr;
  void* out = nullptr;
  if (primSends(s.prim)) {
    outCh = &ep_.send(s.sendPeer, s.channel);
    out = outCh->tryAcquire();
    if (out == nullptr) return false;
  }

  Piece p;
  p.prim = s.prim;
  p.slot = slot;
  p.out = out;
  p.src = primReads(s.prim) ? address(s.src.buf, s.src.offset + begin, c) : nullptr;
  p.dst = primWrites(s.prim) ? address(s.dst.buf, s.dst.offset + begin, c) : nullptr;
  p.len = len;
  p.bytes = bytes;
  p.divisor = (s.finalize && args.op == RedOp::kAvg && size_ > 1) ? uint64_t(size_) : 1;
  if (outCh != nullptr) p.receiverLineNanos = outCh->receiverLineNanos();
  if (s.prim == Prim::kGatherReduce) {
    gatherSrcs_[rank_] = p.src;
    p.gatherSrcs = gatherSrcs_.data();
    p.gatherCount = size_;
  }
  if (p.len > 0) engine_.move(p, args);  // an empty message moves no data
  if (deferred_) {
    pending_.push_back(Pending{&c, in, outCh, bytes});
  } else {
    commit(c, s, in, outCh, bytes);
  }
  return true;
}

void ProgramRunner::commit(Cursor& c, const Step& s, transport::RecvChannel* in,
                           transport::SendChannel* out, size_t bytes) {
  // The counters: one relaxed add each, on lines only this thread writes.
  auto add = [](std::atomic<uint64_t>& n, size_t b) {
    n.store(n.load(std::memory_order_relaxed) + b, std::memory_order_relaxed);
  };
  if (s.prim == Prim::kGatherReduce) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      ep_.recv(q, s.channel).release();
      add(receivedFrom_[q], bytes);
    }
  } else if (in != nullptr) {
    in->release();
    add(receivedFrom_[s.recvPeer], bytes);
  }
  if (out != nullptr) {
    out->post(bytes, c.meta);
    add(sentTo_[s.sendPeer], bytes);
  }
  if (++c.piece >= std::max<size_t>(pieceCount(s.count, c.args->elemsPerPiece), 1)) {
    c.piece = 0;
    c.step++;
  }
}

std::string ProgramRunner::waitingText(size_t* unfinishedOut) const {
  // Name what this rank was waiting for: the peers of every unfinished lane's current step.
  std::string waiting;
  size_t unfinished = 0, lane = 0;
  for (const Cursor& c : cursors_) {
    ++lane;
    if (c.done()) continue;
    ++unfinished;
    const Step& s = stepOf(c);
    // In a group each lane is an op of its own: name it (its peer, number and size).
    if (feed_ != nullptr) waiting += fmt::format("; {}", what(*c.args));
    if (c.anySource && !c.started) {
      waiting += fmt::format("; waiting to receive from any peer (tag {}) on channel {}",
                             c.args->header.tag, c.lane->steps[c.step].channel);
      continue;
    }
    // Where in its schedule: the step (and lane, when there are several) it stands at.
    const std::string at =
        cursors_.size() > 1 && feed_ == nullptr
            ? fmt::format(" (lane {}, step {} of {})", lane - 1, c.step + 1, c.lane->steps.size())
            : fmt::format(" (step {} of {})", c.step + 1, c.lane->steps.size());
    if (s.prim == Prim::kGatherReduce) {
      // Name the peers whose message is missing (a probe is not the message).
      std::string missing;
      for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        transport::MessageMeta meta;
        if (ep_.recv(q, s.channel).tryPeek(nullptr, &meta) != nullptr && !isProbe(meta)) continue;
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", q);
      }
      waiting += fmt::format(
          "; waiting to receive from peer rank {} on channel {} (gathering "
          "from all peers){}",
          missing.empty() ? "-" : missing, s.channel, at);
    } else {
      if (primReceives(s.prim))
        waiting += fmt::format("; waiting to receive from peer rank {} on channel {}{}", s.recvPeer,
                               s.channel, at);
      if (primSends(s.prim))
        waiting += fmt::format("; waiting to send to peer rank {} on channel {}{}", s.sendPeer,
                               s.channel, at);
    }
  }
  *unfinishedOut = unfinished;
  return waiting;
}

void ProgramRunner::failWaiting(ErrorCode code, const ExecArgs& args, const std::string& why) {
  size_t unfinished = 0;
  const std::string waiting = waitingText(&unfinished);
  // Launched work may still use the buffers; let it end before they are given back.
  engine_.abandon();
  pending_.clear();
  const std::string head =
      feed_ != nullptr
          ? fmt::format("point-to-point ops posted together ({} unfinished)", unfinished)
          : what(args);
  fail(code, "rank {}: {}: {}{}", rank_, head, why, waiting);
}

void ProgramRunner::checkArrivals(const ExecArgs& args) {
  // Point-to-point numbers are per peer and may equal a collective's: only collectives look.
  if (args.header.coll == Collective::kSend) return;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    for (int ch = 0; ch < ep_.channels(); ++ch) {
      size_t bytes = 0;
      transport::MessageMeta meta;
      if (peekData(q, ch, &bytes, &meta, args) == nullptr) continue;
      // Another number is another op (a peer already on the next one, a send); not ours to judge.
      if (meta.words[0] != expectedMeta_.words[0]) continue;
      if (std::memcmp(meta.words, expectedMeta_.words, sizeof meta.words) == 0) continue;
      const OpHeader got = decodeHeader(meta);
      if (got.coll == Collective::kSend) continue;
      failWaiting(ErrorCode::kMismatch, args,
                  fmt::format("collective mismatch with peer rank {}: this rank called {}, peer "
                              "rank {} called {}",
                              q, describeHeader(args.header), q, describeHeader(got)));
    }
  }
}

bool ProgramRunner::advanceAll(size_t* unfinished) {
  bool moved = false;
  if (!deferred_) {
    for (Cursor& c : cursors_) {
      while (!c.done() && tryPiece(c)) {
        moved = true;
        if (c.atEnd()) laneFinished(c, unfinished);
      }
    }
    return moved;
  }
  // Deferred: at most one piece launched per lane (zero-count steps advance without one), one
  // wait for all of them, then their slots are released and posted.
  for (Cursor& c : cursors_) {
    while (!c.done()) {
      const size_t before = pending_.size();
      if (!tryPiece(c)) break;
      moved = true;
      if (pending_.size() != before) break;
      if (c.atEnd()) laneFinished(c, unfinished);
    }
  }
  if (pending_.empty()) return moved;
  engine_.finish(*this, *runArgs_);
  for (Pending& p : pending_) {
    commit(*p.cursor, stepOf(*p.cursor), p.in, p.out, p.bytes);
    if (p.cursor->atEnd()) laneFinished(*p.cursor, unfinished);
  }
  pending_.clear();
  return moved;
}

int ProgramRunner::goneAwaitedPeer(const ExecArgs& args) {
  // A peer is awaited only while its message is missing (or, sending, no slot to it is free): a
  // peer that finished its part and left (its message is already here) strands nobody. Liveness
  // is read first: what a peer posted before it went is visible once its death is.
  auto goneFrom = [&](int peer, int channel) {
    if (peer < 0 || peer == rank_ || ep_.peerAlive(peer)) return false;
    size_t bytes = 0;
    transport::MessageMeta meta;
    return peekData(peer, channel, &bytes, &meta, args) == nullptr;
  };
  auto goneTo = [&](int peer, int channel) {
    if (peer < 0 || peer == rank_ || ep_.peerAlive(peer)) return false;
    return ep_.send(peer, channel).tryAcquire() == nullptr;
  };
  for (const Cursor& c : cursors_) {
    if (c.done()) continue;
    const Step& s = stepOf(c);
    if (c.anySource && !c.started) {
      // Any peer may still send what it waits for: only when every one is gone (with nothing
      // here for it) can nothing come; until then the timeout bounds it.
      int first = -1;
      for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        if (!goneFrom(q, s.channel)) {
          first = -1;
          break;
        }
        if (first < 0) first = q;
      }
      if (first >= 0) return first;
      continue;
    }
    if (s.prim == Prim::kGatherReduce) {
      for (int q = 0; q < size_; ++q)
        if (goneFrom(q, s.channel)) return q;
    } else {
      if (primReceives(s.prim) && goneFrom(s.recvPeer, s.channel)) return s.recvPeer;
      if (primSends(s.prim) && goneTo(s.sendPeer, s.channel)) return s.sendPeer;
    }
  }
  return -1;
}

void ProgramRunner::slowPathChecks(const ExecArgs& args, bool checkPeers) {
  if (aborted_.load(std::memory_order_relaxed)) {
    failWaiting(ErrorCode::kAborted, args, "communicator aborted by this process");
  }
  if (auto remote = ep_.peerAbort()) {
    std::string reason;
    const ErrorCode code = decodeAbortReason(remote->second, &reason);
    failWaiting(code, args,
                fmt::format("peer rank {} failed and reported: {}", remote->first, reason));
  }
  checkArrivals(args);
  if (!checkPeers) return;
  if (const int gone = goneAwaitedPeer(args); gone >= 0) {
    // A peer that failed and then exited wrote why before it went: name the first cause.
    if (auto remote = ep_.peerAbort()) {
      std::string reason;
      const ErrorCode code = decodeAbortReason(remote->second, &reason);
      failWaiting(code, args,
                  fmt::format("peer rank {} failed and reported: {}", remote->first, reason));
    }
    failWaiting(
        ErrorCode::kRemoteError, args,
        fmt::format("peer rank {} is gone (its process exited or its connection closed)", gone));
  }
}

void ProgramRunner::addCursor(const LaneRun& run) {
  // Filled where it lies: a cursor built on the stack and copied in was read back as wide loads
  // right after its narrow stores (a store-forwarding stall per lane of every op).
  const size_t index = firstIndex_ + cursors_.size();
  Cursor& c = cursors_.emplace_back();
  c.lane = run.lane;
  c.args = run.args;
  c.meta = encodeHeader(run.args->header);
  c.elemSize = dataTypeSize(run.args->dtype);
  c.index = index;
  const Step& head = run.lane->steps.front();
  c.p2pRecv = run.args->header.coll == Collective::kSend && primReceives(head.prim);
  c.anySource = c.p2pRecv && run.args->anySource;
  if (c.anySource) {
    ++unmatchedAny_;
    return;  // no peer yet: startRecv orders it against the others
  }
  if (feed_ == nullptr) return;
  // A group's lanes on one (peer, direction, channel) share that channel's FIFO: each waits for
  // the one admitted before it, so their messages go (and are matched) in posting order.
  const Step& first = run.lane->steps.front();
  const bool sends = primSends(first.prim);
  const std::tuple<bool, int, int> key{sends, sends ? first.sendPeer : first.recvPeer,
                                       first.channel};
  auto [it, fresh] = lastOn_.try_emplace(key, c.index);
  if (!fresh) {
    cursors_.back().after = it->second;
    it->second = c.index;
  }
}

bool ProgramRunner::admitJoined(size_t* unfinished) {
  joined_.clear();
  feed_->admit(&joined_);
  for (const LaneRun& run : joined_) {
    addCursor(run);
    ++*unfinished;
  }
  return !joined_.empty();
}

void ProgramRunner::laneFinished(Cursor& c, size_t* unfinished) {
  c.finished = true;  // from here on c.lane and c.args are the feed's to free
  if (c.started && recvOwner_[c.from] == c.index) recvOwner_[c.from] = kNoLane;
  --*unfinished;
  if (feed_ != nullptr) feed_->finished(c.index);
}

bool ProgramRunner::waitsForEarlier(const Cursor& c) const {
  if (c.after == kNoLane || c.after < firstIndex_) return false;  // none, or dropped when done
  return !cursors_[c.after - firstIndex_].done();
}

void ProgramRunner::dropFinishedFront() {
  // A group that never drains (a pipeline keeping a recv posted) must not sweep over every lane
  // it ever ran: finished lanes at the front go. Later lanes refer to them by index only.
  while (!cursors_.empty() && cursors_.front().done()) {
    cursors_.pop_front();
    ++firstIndex_;
  }
}

void ProgramRunner::run(const RankProgram& program, const ExecArgs& args) {
  endGroup();
  runArgs_ = &args;
  for (const Lane& lane : program.lanes) {
    if (!lane.steps.empty()) addCursor(LaneRun{&lane, &args});
  }
  try {
    runCursors();
  } catch (...) {
    abandonLaunched();
    throw;
  }
}

void ProgramRunner::abandonLaunched() {
  // However the run failed (a launch, a transport call, a check), work a deferred engine launched
  // may still use the buffers: it ends before they go back to the caller (idempotent).
  engine_.abandon();
  pending_.clear();
}

bool ProgramRunner::runGroup(const std::vector<LaneRun>& lanes, LaneFeed& feed) {
  endGroup();
  feed_ = &feed;
  groupArgs_ = *lanes.front().args;  // a copy: the first op's plan may go before the group ends
  for (const LaneRun& run : lanes) addCursor(run);
  return resumeGroup(feed);
}

bool ProgramRunner::resumeGroup(LaneFeed& feed) {
  feed_ = &feed;
  runArgs_ = &groupArgs_;
  bool drained = false;
  try {
    drained = runCursors();
  } catch (...) {
    abandonLaunched();
    endGroup();
    throw;
  }
  if (drained) endGroup();
  feed_ = nullptr;  // the feed is the caller's: hold nothing of it after return
  return drained;
}

void ProgramRunner::endGroup() {
  feed_ = nullptr;
  lastOn_.clear();
  cursors_.clear();
  firstIndex_ = 0;
  recvOwner_.assign(size_, kNoLane);
  unmatchedAny_ = 0;
}

bool ProgramRunner::runCursors() {
  const ExecArgs& args = *runArgs_;
  expectedMeta_ = encodeHeader(args.header);
  pending_.clear();
  probed_ = false;
  size_t unfinished = 0;
  for (const Cursor& c : cursors_) unfinished += c.done() ? 0 : 1;
  int idle = 0;
  bool announced = false;   // onWaiting_ told about this idle period
  bool pastWindow = false;  // this idle period outlasted the active window
  Clock::time_point lastProgress{}, lastPeerCheck{};
  for (;;) {
    if (feed_ != nullptr) {
      dropFinishedFront();
      if (admitJoined(&unfinished)) idle = 0;
    }
    if (unfinished == 0) return true;
    if (feed_ != nullptr && feed_->pause()) return false;  // no pieces pending between sweeps
    const bool progressed = advanceAll(&unfinished);
    if (progressed || unfinished == 0) {
      if (idle >= spinRounds_) activeWindow_.ended(Clock::now() - lastProgress, pastWindow);
      idle = 0;
      announced = false;
      pastWindow = false;
      continue;
    }
    ++idle;
    if (idle < spinRounds_) {
      cpuRelax();
      continue;
    }
    const auto now = Clock::now();
    if (idle == spinRounds_) {
      lastProgress = now;  // the idle period started (about) here
      lastPeerCheck = now;
    }
    if (aborted_.load(std::memory_order_relaxed)) slowPathChecks(args, false);
    if (now - lastProgress < activeWindow_.window()) {
      if (oversubscribed_) {
        sched_yield();
      } else {
        for (int i = 0; i < 64; ++i) cpuRelax();
      }
      continue;
    }
    pastWindow = true;
    const bool checkPeers = now - lastPeerCheck >= kPeerCheckEvery;
    if (checkPeers) lastPeerCheck = now;
    if (!probed_) sendProbes(args);
    slowPathChecks(args, checkPeers);
    const auto timeout = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(args.timeoutSeconds));
    if (now - lastProgress >= timeout) {
      failWaiting(ErrorCode::kTimeout, args,
                  fmt::format("no progress for {} s (BRAID_TIMEOUT)", args.timeoutSeconds));
    }
    if (!announced && onWaiting_) {
      announced = true;  // once per idle period: this text is for people, not the hot path
      size_t n = 0;
      const std::string text = waitingText(&n);
      onWaiting_(text.size() > 2 ? text.substr(2) : text);
    }
    // Announce the sleep, look once more, then sleep until rung or the slice ends.
    uint32_t ticket = ep_.prepareSleep();
    const bool moved = advanceAll(&unfinished);
    const auto until = moved ? now : std::min(now + kSleepSlice, lastProgress + timeout);
    ep_.sleep(ticket, until);
    if (moved) {
      activeWindow_.ended(Clock::now() - lastProgress, true);
      idle = 0;
      announced = false;
      pastWindow = false;
    }
  }
}

}  // namespace braid::comm
