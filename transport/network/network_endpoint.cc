// NetworkEndpoint: the thread's start and stop, peers' liveness and the abort state. The loop
// itself is progress_loop.cc.
#include "transport/network/network_endpoint.h"

#include <fmt/format.h>

namespace braid::transport {

NetworkEndpoint::NetworkEndpoint(const EndpointConfig& config, const char* kindName,
                                 SpinPolicy spin, int stopSleepMillis)
    : config_(config),
      kindName_(kindName),
      spin_(spin),
      stopSleepMillis_(stopSleepMillis),
      tracked_(static_cast<size_t>(config.size), nullptr) {
  wake_.open(fmt::format("rank {}: {}: eventfd", config.rank, kindName));
}

NetworkEndpoint::~NetworkEndpoint() {
  // Normally joined by the derived destructor already; this only catches a thread that was
  // never started or a destructor that forgot (then the hooks may touch destroyed members).
  stopProgressThread();
}

void NetworkEndpoint::start(Doorbell* doorbell) {
  doorbell_ = doorbell;
  startNetwork();
  thread_ = std::thread([this] { progressLoop(); });
}

void NetworkEndpoint::stopProgressThread() {
  stopping_.store(true);
  wake_.kick();
  if (thread_.joinable()) thread_.join();
}

bool NetworkEndpoint::peerAlive(int peer) {
  const NetworkPeer* state = tracked_[static_cast<size_t>(peer)];
  return state == nullptr || state->alive.load(std::memory_order_acquire);
}

void NetworkEndpoint::signalAbort(const std::string& reason) {
  aborts_.requestOwn(reason);
  wake_.kick();
}

std::optional<std::pair<int, std::string>> NetworkEndpoint::peerAbort() { return aborts_.peer(); }

std::optional<std::string> NetworkEndpoint::takeOwnAbort(size_t maxBytes) {
  if (abortTaken_ || !aborts_.ownRequested()) return std::nullopt;
  abortTaken_ = true;
  return aborts_.ownReason(maxBytes);
}

Deadline NetworkEndpoint::drainLimit() const {
  // After an abort the data no longer matters: only a budget's first step applies.
  return Deadline::after(aborts_.anyAbort() ? 0 : config_.timeoutSeconds);
}

void NetworkEndpoint::markDead(NetworkPeer& peer, const std::string& why, bool protocolError) {
  if (peer.dying.exchange(true)) return;  // a user thread may get here too (inline flush)
  peer.reason = why;
  // The cause first, then the death: whoever sees the peer dead also sees why (peerAbort()).
  aborts_.peerGone(config_.rank, peer.rank, kindName_, why, protocolError, stopping());
  peer.alive.store(false);
  peerDied(peer, protocolError);
  ringDoorbell();
}

void NetworkEndpoint::ringDoorbell() {
  if (doorbell_ != nullptr) transport::ringDoorbell(*doorbell_);
}

void NetworkEndpoint::ringDoorbellIfSleeping() {
  if (doorbell_ != nullptr) transport::ringDoorbellIfSleeping(*doorbell_);
}

}  // namespace braid::transport
