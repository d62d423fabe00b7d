#include "comm/detail/p2p_group.h"

#include <fmt/format.h>

namespace braid::comm {

P2pGroup::P2pGroup(CommState& state) : state_(state) {}

void P2pGroup::take(std::vector<LaneRun>* lanes) {
  seenPushes_ = state_.queuePushes.load(std::memory_order_relaxed);
  while (!state_.queue.empty() && isPointToPoint(state_.queue.front()->desc.coll)) {
    CommState::OpPtr op = std::move(state_.queue.front());
    state_.queue.pop_front();
    if (op->desc.count == 0) {
      state_.completeOp(*op, ErrorCode::kOk, "");
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
  Member& m = members_[index - firstIndex_];
  m.done = true;
  if (m.op.get() == pauseFor_) pause_ = true;
  state_.completeOp(*m.op, ErrorCode::kOk, "");
  while (!members_.empty() && members_.front().done) {  // the runner is done with their plans
    members_.pop_front();
    ++firstIndex_;
  }
  // A thread in helpUntilDone sleeps on waitersCv, not on the op: wake it under the queue's lock
  // so the wake-up cannot fall between its check and its sleep.
  std::lock_guard<std::mutex> lock(state_.queueMutex);
  if (state_.waiters > 0) state_.waitersCv.notify_all();
}

void P2pGroup::matched(size_t index, int peer, size_t count) {
  CommState::Op& op = *members_[index - firstIndex_].op;
  // Read by Request::received() only after the op is done (completeOp publishes it).
  op.received = RecvResult{peer, count * dataTypeSize(op.desc.dtype)};
}

void P2pGroup::failUnfinished(ErrorCode code, const std::string& message, bool byRunner) {
  for (Member& m : members_) {
    if (m.done) continue;
    m.done = true;
    state_.completeOp(*m.op, code, message, byRunner);
  }
}

}  // namespace braid::comm

namespace braid {

void CommState::runP2pGroup(std::unique_lock<std::mutex>& lock, const Request::Op* forOp) {
  std::vector<comm::LaneRun> lanes;
  const bool fresh = openGroup == nullptr;
  if (fresh) {
    openGroup = std::make_unique<comm::P2pGroup>(*this);
    openGroup->take(&lanes);
  }
  comm::P2pGroup& group = *openGroup;
  group.pauseWhenDone(forOp);
  lock.unlock();
  bool drained = true;
  try {
    if (fresh) {
      {
        std::lock_guard<std::mutex> errorLock(errorMutex);
        if (broken) throw *broken;
      }
      if (aborted.load()) {
        fail(ErrorCode::kAborted, "rank {}: point-to-point ops: the communicator was aborted",
             rank);
      }
      if (!lanes.empty()) drained = executor->runGroup(lanes, group);
    } else {
      drained = executor->resumeGroup(group);
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidUsage) breakOn(e);
    group.failUnfinished(e.code(), e.what());
  } catch (const std::exception& e) {
    group.failUnfinished(ErrorCode::kInternal,
                         fmt::format("rank {}: internal error: {}", rank, e.what()));
  }
  lock.lock();
  if (drained) {
    openGroup.reset();
  } else {
    groupPausedAt = Clock::now();
  }
}

void CommState::failOpenGroup(const std::string& why) {
  if (openGroup == nullptr || busy) return;  // a running group ends itself (it sees the abort)
  openGroup->failUnfinished(ErrorCode::kAborted, why, false);
  openGroup.reset();
}

}  // namespace braid
