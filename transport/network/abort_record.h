// The abort state a connection-based transport (tcp, ucx) keeps: this rank's own abort, which its
// progress thread sends to every peer, the first abort a peer sent here, and what a peer's end
// (protocol error or lost connection) records and logs.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/log.h"

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
  /// What tcp and ucx do when a peer's connection ends (`transport` names which, for the log):
  /// a protocol error becomes that peer's abort, "protocol error from rank P: why", with one
  /// WARN line; a lost connection is one INFO line. `quiet` (the endpoint is being destroyed):
  /// no log lines.
  void peerGone(int rank, int peer, const char* transport, const std::string& why,
                bool protocolError, bool quiet) {
    if (protocolError) {
      std::string text = fmt::format("protocol error from rank {}: {}", peer, why);
      if (!quiet) BRAID_WARN("rank {}: {}: {}", rank, transport, text);
      recordPeer(peer, text);
    } else if (!quiet) {
      BRAID_INFO("rank {}: {} connection to peer rank {} lost: {}", rank, transport, peer, why);
    }
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
