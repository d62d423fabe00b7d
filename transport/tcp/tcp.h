// The tcp transport: one socket per peer pair carrying every channel, a progress thread per
// endpoint, credit-based flow control. Internal to transport/ (users see transport/transport.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "transport/abort_record.h"
#include "transport/backend.h"
#include "transport/doorbell.h"
#include "transport/progress_wake.h"
#include "transport/transport.h"

namespace braid::transport::tcp {

class TcpSendChannel;
class TcpRecvChannel;
struct PeerLink;

/// Connection happens in steps so the caller can interleave them with other transports:
///   TcpTransport(config, kv)  listens and publishes "<jobId>/tcp/<rank>" = "addr:port";
///   connectPeers(kv, deadline) connects to higher ranks, accepts lower ranks (handshake checked);
///   start(doorbell)           starts the progress thread, which rings `doorbell` on arrivals.
/// The destructor flushes what was posted (bounded), closes the sockets and joins the thread.
class TcpTransport final : public BackendEndpoint {
 public:
  TcpTransport(const EndpointConfig& config, KeyValue& kv);
  ~TcpTransport() override;
  Kind kind() const override { return Kind::kTcp; }
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  void connectPeers(KeyValue& kv, Deadline deadline) override;
  void start(Doorbell* doorbell) override;

  SendChannel& send(int peer, int channel) override;
  RecvChannel& recv(int peer, int channel) override;
  /// False once the peer's connection closed, reset, or broke the protocol.
  bool peerAlive(int peer) override;
  /// Queues an abort frame to every tcp peer; safe from any thread.
  void signalAbort(const std::string& reason) override;
  /// The first abort a tcp peer sent (or a protocol error a peer committed).
  std::optional<std::pair<int, std::string>> peerAbort() override;

  /// Wakes the progress thread if it sleeps.
  void wakeProgress();
  /// After post/release: writes the link's pending frames from the calling thread if no other
  /// thread is writing it, else leaves them to the progress thread.
  void flushSoon(PeerLink& link);

 private:
  void acceptPeers(Deadline deadline);
  void progressLoop();
  bool progressOnce();
  bool hasLocalWork();
  bool hasPendingOutput();
  bool flushOut(PeerLink& link);
  bool flushOutLocked(PeerLink& link);
  /// A send to the link failed: stop writing it, keep reading it (caller holds its mutex).
  void outputFailed(PeerLink& link, int err);
  bool readIn(PeerLink& link);
  void markDead(PeerLink& link, const std::string& why, bool protocolError);
  void recordAbort(int peer, const std::string& reason);

  EndpointConfig config_;
  int listenFd_ = -1;
  int epollFd_ = -1;
  ProgressWake wake_;  // user threads wake the progress thread through it
  std::vector<std::unique_ptr<PeerLink>> links_;  // by rank; null for non-tcp peers
  std::vector<std::unique_ptr<TcpSendChannel>> sends_;
  std::vector<std::unique_ptr<TcpRecvChannel>> recvs_;
  Doorbell* doorbell_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool abortQueued_ = false;  // progress thread only
  AbortRecord aborts_;        // this rank's abort (sent by the progress thread), the first peer's
};

}  // namespace braid::transport::tcp
