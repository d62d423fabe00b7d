#include "comm/bootstrap/drop_log.h"

#include "common/log.h"

namespace braid::bootstrap {

DropLog::DropLog(std::string tag, int linesPerWindow, Clock::duration window)
    : tag_(std::move(tag)), linesPerWindow_(linesPerWindow), window_(window) {}

void DropLog::dropped(const std::string& peer, const std::string& reason) {
  total_.fetch_add(1);
  const auto now = Clock::now();
  if (open_ && now >= windowStart_ + window_) flush(now);
  if (!open_) {
    open_ = true;
    windowStart_ = now;
    logged_ = 0;
    // Right after a window that overflowed, the flood is still on: summaries only.
    flooding_ = flooding_ && now < lastSummary_ + window_;
    budget_ = flooding_ ? 0 : linesPerWindow_;
  }
  if (logged_ < budget_) {
    ++logged_;
    BRAID_WARN("{}: dropped connection from {}: {}", tag_, peer, reason);
    return;
  }
  ++heldBack_;
  latestPeer_ = peer;
  latestReason_ = reason;
}

Clock::time_point DropLog::flush(Clock::time_point now) {
  if (!open_) return Clock::time_point::max();
  const auto due = windowStart_ + window_;
  if (now < due) return heldBack_ > 0 ? due : Clock::time_point::max();
  if (heldBack_ > 0) {
    BRAID_WARN("{}: {} more connections dropped in the last {:.1f}s (latest from {}: {})", tag_,
               heldBack_, std::chrono::duration<double>(now - windowStart_).count(), latestPeer_,
               latestReason_);
    flooding_ = true;
    lastSummary_ = now;
  } else {
    flooding_ = false;
  }
  heldBack_ = 0;
  open_ = false;
  return Clock::time_point::max();
}

}  // namespace braid::bootstrap
