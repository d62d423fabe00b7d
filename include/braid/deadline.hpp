// Deadlines for every blocking wait, and the BRAID_TIMEOUT default. Public: Request::wait takes
// one.
#pragma once

#include <chrono>

namespace braid {

using Clock = std::chrono::steady_clock;

/// A point in time after which a wait gives up. Deadline::never() exists only for tests.
class Deadline {
 public:
  static Deadline after(double seconds);
  static Deadline at(Clock::time_point when) { return Deadline(when); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }

  bool expired() const { return Clock::now() >= when_; }
  Clock::time_point when() const { return when_; }
  /// Seconds left (0 when expired); for poll()/futex timeouts.
  double secondsLeft() const;
  /// Milliseconds left rounded up, capped at INT32_MAX; for poll().
  int millisLeft() const;
  Deadline earlier(Deadline other) const { return when_ < other.when_ ? *this : other; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

/// BRAID_TIMEOUT in seconds (fractional allowed), 60 when unset. Throws kInvalidUsage on a
/// malformed or non-positive value, naming the variable.
double defaultTimeoutSeconds();

}  // namespace braid
