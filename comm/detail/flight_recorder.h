// The flight recorder: the last N operations of one communicator (issued, started, ended, with
// wall-clock times, the algorithm and any error), so that after a failure every rank can say
// what it was doing. Dumped on the communicator's first failure to BRAID_DUMP_DIR/rank-R.json
// (when set); tools/trace/braid-trace merges the ranks' dumps into one timeline and says where
// they diverge. Internal to comm/. Thread-safe (its own mutex; every call is O(1) amortised).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "braid/braid.hpp"
#include "comm/detail/op_plan.h"

namespace braid::comm {

class FlightRecorder {
 public:
  enum class State { kIssued, kStarted, kCompleted, kFailed };
  struct Entry {
    OpDesc desc;  ///< buffers are not kept (zeroed)
    Algorithm algorithm = Algorithm::kAuto;
    /// When: ticks (the time-stamp counter), wall-clock ns in json(); 0: not yet.
    int64_t issuedNs = 0, startedNs = 0, endedNs = 0;
    State state = State::kIssued;
    std::string error;
  };

  /// Keeps the last `capacity` operations (0: records nothing).
  explicit FlightRecorder(size_t capacity);

  /// Records a numbered op; returns its place for OpDesc::recorded (0 when nothing is kept).
  uint64_t issued(const OpDesc& d);
  /// The op's start and end (found by d.recorded in O(1); ignored once it left the record).
  void started(const OpDesc& d, Algorithm algorithm);
  /// `error` empty when it succeeded. Only the first end of an op counts.
  void ended(const OpDesc& d, const std::string& error);

  size_t size() const;
  /// The recorded entries, oldest first.
  std::deque<Entry> entries() const;
  /// The dump: {"rank", "size", "host", "pid", "reason", "capacity", "entries": [...]}.
  std::string json(int rank, int size, const std::string& reason) const;
  /// Writes json() to dir/rank-R.json (through a temporary file and a rename). Returns the path,
  /// or "" with *why set when it could not be written.
  std::string dump(const std::string& dir, int rank, int size, const std::string& reason,
                   std::string* why) const;

  static const char* stateName(State state);

 private:
  Entry* find(const OpDesc& d);  // its entry, or nullptr (mutex held)
  int64_t toWallNs(int64_t tick, int64_t tickNow, int64_t wallNow) const;

  size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<Entry> entries_;
  uint64_t firstPlace_ = 1;  // the place of entries_.front()
  int64_t tick0_, wall0_;    // a tick and the wall clock at construction, for toWallNs
};

}  // namespace braid::comm
