// When the progress thread may run the op at the front of a communicator's queue (host: callers
// also run ops, in wait()).
//
// A fresh op is left alone for `grace`: a caller that submits and then waits runs it cheaper
// itself. While the caller is still submitting (ops were pushed since the progress thread last
// looked) it is left the queue longer, up to `maxDefer` of one op at the front: a bench issues a
// batch and then waits for it, and otherwise this thread and the caller take turns on the queue
// (with a rank per core, this thread takes the core of a peer rank). Ages are what the progress
// thread saw, by its own clock, so a submit reads no clock; ops are reused, so the front is known
// by address and number.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace braid::comm {

class ProgressPace {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressPace(Clock::duration grace, Clock::duration maxDefer)
      : grace_(grace), maxDefer_(maxDefer) {}

  /// When the front op (`front`, `seq`) may run, looked at `now` with `pushes` ops ever queued.
  Clock::time_point due(Clock::time_point now, const void* front, uint64_t seq, uint64_t pushes) {
    if (grace_ <= Clock::duration::zero()) return now;
    if (front != front_ || seq != seq_) {
      front_ = front;
      seq_ = seq;
      seenAt_ = now;
      pushes_ = pushes;
      return now + grace_;
    }
    if (pushes != pushes_) {
      pushes_ = pushes;
      return std::min(now + grace_, seenAt_ + maxDefer_);
    }
    return seenAt_ + grace_;
  }

 private:
  Clock::duration grace_, maxDefer_;
  const void* front_ = nullptr;
  uint64_t seq_ = 0;
  Clock::time_point seenAt_{};
  uint64_t pushes_ = 0;
};

}  // namespace braid::comm
