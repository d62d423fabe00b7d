// The abort state a connection-based transport (tcp, ucx) keeps: this rank's own abort, which its
// progress thread sends to every peer, and the first abort a peer sent here.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace braid::transport {

class AbortRecord {
 public:
  /// Records this rank's abort (the first reason wins). Any thread.
  void requestOwn(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ownReason_.empty()) ownReason_ = reason.empty() ? "aborted" : reason;
    }
    ownRequested_.store(true, std::memory_order_seq_cst);
  }
  /// Whether requestOwn() was called (cheap; for the progress thread's loop).
  bool ownRequested(std::memory_order order = std::memory_order_acquire) const {
    return ownRequested_.load(order);
  }
  /// This rank's reason, cut to `maxBytes`.
  std::string ownReason(size_t maxBytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ownReason_.substr(0, maxBytes);
  }
  /// Records a peer's abort; the first one is kept.
  void recordPeer(int peer, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!peer_) peer_ = std::make_pair(peer, reason);
  }
  /// The first peer abort: {peer rank, reason}.
  std::optional<std::pair<int, std::string>> peer() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peer_;
  }
  /// Whether this rank or a peer aborted (teardown then need not wait for peers to take data).
  bool anyAbort() const {
    if (ownRequested()) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    return peer_.has_value();
  }

 private:
  std::atomic<bool> ownRequested_{false};
  mutable std::mutex mutex_;
  std::string ownReason_;
  std::optional<std::pair<int, std::string>> peer_;
};

}  // namespace braid::transport
