// The tcp transport: one socket per peer pair carrying every channel as frames (wire.h), one
// more implementation of network/net.h driven by ChannelEndpoint (the pump, credits, aborts,
// arrivals, the user-driven progress and the progress thread's hooks are that class's).
// Internal to transport/ (users see transport/transport.h).
#pragma once

#include <sys/epoll.h>

#include <memory>
#include <mutex>
#include <string>

#include "transport/network/channel_endpoint.h"
#include "transport/network/tagged_channels.h"
#include "transport/tcp/handshakes.h"
#include "transport/tcp/wire.h"
#include "transport/transport.h"

namespace braid::transport::tcp {

class TcpTransport;
struct PeerState;
struct SendSlot;
struct RecvSlot;
using TcpSendChannel = TaggedSendChannel<TcpTransport, PeerState, SendSlot>;
using TcpRecvChannel = TaggedRecvChannel<TcpTransport, PeerState, RecvSlot>;
using TcpBase = ChannelEndpoint<TcpTransport, PeerState, SendSlot, RecvSlot>;

/// Destroying the endpoint (teardown.cc): deliver what was posted (awaitSends), half-close, then
/// linger until the peers acknowledged every byte; each phase a DrainBudget.
struct Teardown {
  static constexpr double kFlushSeconds = 1;     // writing, without progress
  static constexpr double kLingerSeconds = 0.5;  // waiting for acks, without progress
};

/// Connection happens in steps so the caller can interleave them with other transports:
///   TcpTransport(config, kv)  listens and publishes "<jobId>/tcp/<rank>" = "addr:port";
///   connectPeers(kv, deadline) (ChannelEndpoint's, over connect.cc's connect and accept):
///                             dials higher ranks, accepts lower ranks (handshake checked);
///   start(doorbell)           starts the progress thread, which rings `doorbell` on arrivals.
/// The destructor delivers what was posted (bounded), closes the sockets and joins the thread.
/// net.h's calls, mutex_ held: isend queues a data frame (the slot's header and payload) and
/// writes the socket at once, as far as it takes it (the rest on EPOLLOUT); irecv is nothing
/// (the reader copies frames into the receive slots); credit and control queue a credit or an
/// abort frame likewise; test reads the ready sockets (epoll, non-blocking).
class TcpTransport final : public TcpBase {
 public:
  TcpTransport(const EndpointConfig& config, KeyValue& kv);
  ~TcpTransport() override;
  Kind kind() const override { return Kind::kTcp; }

  // connectPeers, send, recv (ChannelEndpoint): the channels to a peer of this kind.
  // peerAlive (ChannelEndpoint): false once the peer's connection closed, reset, or broke the
  // protocol.

  // tagged_channels.h's owner hooks: flushSoon (ChannelEndpoint), and:
  /// tryAcquire/tryPeek found nothing: reads the ready sockets, but only while the progress
  /// thread sleeps (tcp.cc).
  void pollSoon();
  void* slotsAllocated(void*, size_t, bool) { return nullptr; }  // nothing to register
  static constexpr const char* kName = "tcp";

 private:
  friend TcpBase;

  // network/net.h's connection phase (connect.cc): connect dials a higher peer (hello, then its
  // Ack); connectWait accepts and checks the lower peers' connections; both directions are up
  // with the handshake.
  std::string handleKey(const PeerState& peer) const override;
  net::Issue connect(PeerState& peer, const std::string& handle, KeyValue& kv) override;
  net::Issue accept(PeerState& peer) override;
  std::string awaiting(const PeerState& peer, bool send) const override;
  void connectWait(int timeoutMillis, std::unique_lock<std::mutex>& lock) override;
  void connected() override;
  Handshakes& handshakes();
  /// Reads an accepted connection's handshake (`ready`: poll said there is input); accepts the
  /// peer or rejects the connection (closed, one warning).
  void readHandshake(Incoming& c, bool ready);
  // NetworkEndpoint's hooks (tcp.cc).
  void startNetwork() override;
  void peerDied(NetworkPeer& peer, bool protocolError) override;

  // network/net.h's calls, mutex_ held (writer.cc: isend, credit, control; reader.cc: the rest).
  net::Issue isend(TcpSendChannel& channel, uint64_t n) override;
  net::Issue irecv(TcpRecvChannel&, uint32_t) override { return net::Issue::kDone; }
  net::Issue credit(PeerState& peer, int channel, uint64_t count) override;
  /// kAbort: an abort frame; heartbeats and hellos are not needed (the socket reports a dead
  /// peer, the handshake is connect.cc's).
  net::Issue control(PeerState& peer, net::ControlType type, const std::string& payload) override;
  bool test(int rounds) override;
  void sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) override;
  size_t sendsInFlight() const override;
  void userDrove(bool) override {}  // the pump wrote the sockets already

  /// Appends a frame (header and `payload`) to the peer's control output and writes.
  void queueControl(PeerState& peer, const FrameHeader& header, const std::string& payload);
  /// Writes the peer's queued frames while the socket takes them; registers EPOLLOUT for the
  /// rest. True if anything was written.
  bool writeOut(PeerState& peer);
  /// A send to the peer failed: stop writing it, keep reading it.
  void outputFailed(PeerState& peer, int err, size_t bytes);
  /// Reads the peer's frames into the receive slots, credits and aborts (bounded per call).
  bool readIn(PeerState& peer);
  /// A complete frame `h` from the peer (its body, if any, read).
  void frameArrived(PeerState& peer, const FrameHeader& h);
  /// The frame header just read: checks it and sets where its body goes; false when the peer
  /// was marked dead for it.
  bool headerArrived(PeerState& peer);

  // Teardown (teardown.cc).
  void closeConnections();
  /// Lingering: discards what still arrives on the peers' sockets, notices their close.
  void discardInput(int timeoutMillis);

  int listenFd_ = -1;
  int epollFd_ = -1;
  std::unique_ptr<Handshakes> handshakes_;  // while connecting
};

}  // namespace braid::transport::tcp
