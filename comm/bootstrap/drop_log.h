// Rate-limited warnings about connections the store drops (internal to comm/bootstrap).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "braid/deadline.hpp"

namespace braid::bootstrap {

/// Counts every dropped connection and logs the first few of each one-second window, one
/// BRAID_WARN line each; the rest are folded into one summary line per window ("N more
/// connections dropped in the last Xs"). While a flood goes on (the window before also
/// overflowed) only the summaries are logged. So anyone who can reach the port can cost the log
/// a few lines a second at most. Used by the serving thread only; total() is thread-safe.
class DropLog {
 public:
  explicit DropLog(std::string tag, int linesPerWindow = 5,
                   Clock::duration window = std::chrono::seconds(1));

  /// Counts a dropped connection from `peer`; logs it when this window still has lines left.
  void dropped(const std::string& peer, const std::string& reason);
  /// Logs the summary of a finished window that held back lines. Returns when it must be called
  /// next (Clock::time_point::max() when nothing is held back).
  Clock::time_point flush(Clock::time_point now);
  /// Connections dropped so far.
  size_t total() const { return total_.load(); }

 private:
  std::string tag_;
  int linesPerWindow_;
  Clock::duration window_;
  std::atomic<size_t> total_{0};
  bool open_ = false;  // a window is running
  Clock::time_point windowStart_;
  int logged_ = 0;         // lines logged in this window
  int budget_ = 0;         // lines this window may log
  size_t heldBack_ = 0;    // drops of this window not logged on their own
  bool flooding_ = false;  // the last window ended with drops held back
  Clock::time_point lastSummary_;
  std::string latestPeer_, latestReason_;
};

}  // namespace braid::bootstrap
