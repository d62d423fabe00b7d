// The flight recorder: the last N operations of one communicator (issued, started, ended, with
// the time-stamp counter at issue and end, the algorithm and any error), so that after a failure
// every rank can say what it was doing. Dumped on the communicator's first failure to
// BRAID_DUMP_DIR/rank-R.json (when set); tools/trace/braid-trace merges the ranks' dumps into one
// timeline and says where they diverge.
//
// Cost: always on (N = BRAID_FLIGHT_OPS, default 2000), so an op's three calls are a handful of
// relaxed stores into a preallocated ring and two counter reads (issue, end): no lock, no
// allocation (an error's text, the rare case, goes into a map under a mutex). Concurrency: ops are
// issued by one thread at a time (the caller holds the communicator's queue mutex); started and
// ended may run on another thread, each on its own op's entry. Readers (entries(), the dump) may
// run at any time: an entry is re-read until its place is the same before and after the copy.
// Every field is an atomic word, so there is no data race; the one inexactness is that an op
// still running when N newer ops have been issued after it has lost its entry, and its end may
// mark the newer op that took its entry (a diagnostic's price for a lock-free ring; with the
// default N that needs 2000 ops in flight at once). Internal to comm/.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "braid/braid.hpp"
#include "comm/detail/op_plan.h"

namespace braid::comm {

class FlightRecorder {
 public:
  enum class State { kIssued, kStarted, kCompleted, kFailed };
  struct Entry {
    OpDesc desc;  ///< buffers are not kept (null)
    Algorithm algorithm = Algorithm::kAuto;
    /// When: ticks (the time-stamp counter), wall-clock ns in json(); 0: not yet.
    int64_t issuedNs = 0, endedNs = 0;
    State state = State::kIssued;
    std::string error;
  };

  /// Keeps the last `capacity` operations (0: records nothing).
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder();

  /// Whether it records (capacity > 0): the caller takes d.issuedTick only then.
  bool keeps() const { return capacity_ > 0; }
  /// Records a numbered op issued at d.issuedTick; returns its place for OpDesc::recorded (0 when
  /// nothing is kept).
  uint64_t issued(const OpDesc& d);
  /// The op's start (found by d.recorded in O(1); ignored once it left the record).
  void started(const OpDesc& d, Algorithm algorithm);
  /// A started op that runs as `algorithm` after all (the mapped single copy, decided after the
  /// start by an exchange).
  void ranAs(const OpDesc& d, Algorithm algorithm);
  /// `error` empty when it succeeded. Only the first end of an op counts. Returns the tick it
  /// took as the end (0 when it keeps nothing).
  int64_t ended(const OpDesc& d, std::string_view error);

  size_t size() const;
  /// The recorded entries, oldest first.
  std::vector<Entry> entries() const;
  /// The dump: {"rank", "size", "host", "pid", "reason", "capacity", "entries": [...]}.
  std::string json(int rank, int size, const std::string& reason) const;
  /// Writes json() to dir/rank-R.json (through a temporary file and a rename). Returns the path,
  /// or "" with *why set when it could not be written.
  std::string dump(const std::string& dir, int rank, int size, const std::string& reason,
                   std::string* why) const;

  static const char* stateName(State state);

  struct Slot;  // one entry of the ring (flight_recorder.cc)

 private:
  Slot* slotOf(uint64_t place) const;  // its slot when it still holds `place`, else nullptr
  int64_t toWallNs(int64_t tick, int64_t tickNow, int64_t wallNow) const;

  size_t capacity_;
  uint64_t mask_;  // slots - 1 (a power of two at least capacity_)
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> issuedCount_{0};  // places handed out (the newest op's place)
  mutable std::mutex errorMutex_;
  std::map<uint64_t, std::string> errors_;  // by place, the last `capacity_` failures
  int64_t tick0_, wall0_;                   // a tick and the wall clock at construction
};

}  // namespace braid::comm
