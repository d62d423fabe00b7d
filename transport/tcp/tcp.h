// The tcp transport: one socket per peer pair carrying every channel, a progress thread per
// endpoint, credit-based flow control. Internal to transport/ (users see transport/transport.h).
#pragma once

#include <sys/epoll.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/network/drain_budget.h"
#include "transport/network/network_endpoint.h"
#include "transport/transport.h"

namespace braid::transport::tcp {

class TcpSendChannel;
class TcpRecvChannel;
struct PeerLink;

/// Destroying the endpoint (progress thread): flush what was posted, half-close, then linger until
/// the peers acknowledged every byte; each phase a DrainBudget (see finishStopping()).
struct Teardown {
  static constexpr double kFlushSeconds = 1;     // writing, without progress
  static constexpr double kLingerSeconds = 0.5;  // waiting for acks, without progress
  explicit Teardown(Deadline limit) : limit(limit), flush(kFlushSeconds, limit) {}
  Deadline limit;
  DrainBudget flush;
  std::optional<DrainBudget> linger;  // set once half-closed
  long unackedBefore = -1;            // bytes not acked at the last look
};

/// Connection happens in steps so the caller can interleave them with other transports:
///   TcpTransport(config, kv)  listens and publishes "<jobId>/tcp/<rank>" = "addr:port";
///   connectPeers(kv, deadline) connects to higher ranks, accepts lower ranks (handshake checked);
///   start(doorbell)           starts the progress thread, which rings `doorbell` on arrivals.
/// The destructor flushes what was posted (bounded), closes the sockets and joins the thread.
class TcpTransport final : public NetworkEndpoint {
 public:
  TcpTransport(const EndpointConfig& config, KeyValue& kv);
  ~TcpTransport() override;
  Kind kind() const override { return Kind::kTcp; }

  void connectPeers(KeyValue& kv, Deadline deadline) override;
  SendChannel& send(int peer, int channel) override;
  RecvChannel& recv(int peer, int channel) override;
  // peerAlive: false once the peer's connection closed, reset, or broke the protocol.
  // signalAbort: queues an abort frame to every tcp peer.

  /// After post/release: writes the link's pending frames from the calling thread if no other
  /// thread is writing it, else leaves them to the progress thread.
  void flushSoon(PeerLink& link);

 private:
  void acceptPeers(Deadline deadline);
  // NetworkEndpoint's hooks (startNetwork, peerDied: tcp.cc; the rest: progress.cc).
  void startNetwork() override;
  void waitForEvents(int timeoutMillis) override;
  bool progress() override;
  bool hasLocalWork() override;
  bool finishStopping(bool lastRoundDid) override;
  void peerDied(NetworkPeer& peer, bool protocolError) override;

  bool hasPendingOutput();
  bool flushOut(PeerLink& link);
  bool flushOutLocked(PeerLink& link);
  /// A send to the link failed: stop writing it, keep reading it (caller holds its mutex).
  void outputFailed(PeerLink& link, int err);
  bool readIn(PeerLink& link);
  /// Lingering: discards what still arrives on the link, notices its close.
  void discardIn(PeerLink& link);

  int listenFd_ = -1;
  int epollFd_ = -1;
  std::vector<std::unique_ptr<PeerLink>> links_;  // by rank; null for non-tcp peers
  std::vector<std::unique_ptr<TcpSendChannel>> sends_;
  std::vector<std::unique_ptr<TcpRecvChannel>> recvs_;
  // Progress thread only.
  epoll_event events_[64];
  int eventCount_ = 0;                // from the last waitForEvents(), not yet handled
  std::optional<Teardown> teardown_;  // once stopping
};

}  // namespace braid::transport::tcp
