#include "comm/p2p_group.h"

#include <fmt/format.h>

namespace braid::comm {

P2pGroup::P2pGroup(CommState& state) : state_(state) {}

void P2pGroup::take(std::vector<LaneRun>* lanes) {
  seenPushes_ = state_.queuePushes.load(std::memory_order_relaxed);
  while (!state_.queue.empty() && isPointToPoint(state_.queue.front()->desc.coll)) {
    CommState::OpPtr op = std::move(state_.queue.front());
    state_.queue.pop_front();
    if (op->desc.count == 0) {
      CommState::completeOp(*op, ErrorCode::kOk, "");
      continue;
    }
    Member& m = members_.emplace_back();
    m.op = std::move(op);
    m.plan =
        planOp(m.op->desc, state_.rank, state_.size, state_.tunerConfig(), state_.options.slotBytes,
               state_.options.timeoutSeconds, state_.options.streamBytes);
    lanes->push_back(LaneRun{&m.plan.p2p.lanes.front(), &m.plan.args});
  }
}

void P2pGroup::admit(std::vector<LaneRun>* joined) {
  // Pushes are counted under queueMutex; a push missed here is seen at the next sweep, and one
  // still queued when the group ends runs after it (the queue's next front).
  if (state_.queuePushes.load(std::memory_order_relaxed) == seenPushes_) return;
  std::lock_guard<std::mutex> lock(state_.queueMutex);
  take(joined);
}

void P2pGroup::finished(size_t index) {
  Member& m = members_[index];
  m.done = true;
  CommState::completeOp(*m.op, ErrorCode::kOk, "");
  // A thread in helpUntilDone sleeps on waitersCv, not on the op: wake it under the queue's lock
  // so the wake-up cannot fall between its check and its sleep.
  std::lock_guard<std::mutex> lock(state_.queueMutex);
  if (state_.waiters > 0) state_.waitersCv.notify_all();
}

void P2pGroup::failUnfinished(ErrorCode code, const std::string& message) {
  for (Member& m : members_) {
    if (m.done) continue;
    m.done = true;
    CommState::completeOp(*m.op, code, message);
  }
}

}  // namespace braid::comm

namespace braid {

void CommState::runP2pGroup(std::unique_lock<std::mutex>& lock) {
  comm::P2pGroup group(*this);
  std::vector<comm::LaneRun> lanes;
  group.take(&lanes);
  lock.unlock();
  try {
    {
      std::lock_guard<std::mutex> errorLock(errorMutex);
      if (broken) throw *broken;
    }
    if (aborted.load()) {
      fail(ErrorCode::kAborted, "rank {}: point-to-point ops: the communicator was aborted", rank);
    }
    if (!lanes.empty()) executor->runGroup(lanes, group);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidUsage) breakOn(e);
    group.failUnfinished(e.code(), e.what());
  } catch (const std::exception& e) {
    group.failUnfinished(ErrorCode::kInternal,
                         fmt::format("rank {}: internal error: {}", rank, e.what()));
  }
  lock.lock();
}

}  // namespace braid
