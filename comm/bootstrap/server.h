// The TCP side of the store: a key-value server with its own thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "braid/deadline.hpp"

namespace braid::bootstrap {

/// Serves one job's key-value map over TCP to many TcpStore clients from one poll() thread with
/// non-blocking sockets.
///
/// Anyone who can reach the port may connect, so admission is split in two. A new connection
/// waits in a bounded lobby (see lobby.h) until its handshake has arrived: at most
/// maxPreAuthConnections of them, maxPreAuthPerAddress from one IPv4 address, each for at most
/// handshakeTimeoutSeconds and a fixed ~1 KiB; a newcomer over a limit evicts the oldest waiting
/// one, so a flood cannot lock out a rank that connects later. A connection whose handshake is
/// right (magic, version, world size, secret) joins the ranks' table, bounded separately by
/// maxConnections. A wrong version, world size or secret is answered with the reason before the
/// connection is closed, so the client fails at once instead of retrying. A connection that
/// breaks the framing (an over-long or malformed frame) is dropped; the others keep being served.
/// Drops are logged through a rate limit (drop_log.h): a few lines a second, then a summary.
/// Destroying the server closes every connection and joins the thread promptly, even with clients
/// attached (they then see kRemoteError).
class StoreServer {
 public:
  struct Options {
    int port = 0;  ///< 0 = an ephemeral port (see port())
    /// IPv4 address to listen on: the one ranks are told to use (storeBindAddress()), so the
    /// store is not reachable on the host's other interfaces; "0.0.0.0" = every interface.
    std::string bindAddress = "127.0.0.1";
    int worldSize = 0;                   ///< ranks in the job; 0 = taken from the first client
    std::string secret;                  ///< "" = jobSecret() (BRAID_SECRET)
    double handshakeTimeoutSeconds = 3;  ///< a new connection must complete its handshake by then
    /// Connections that completed the handshake; 0 = worldSize + 16 (1024 while the world size
    /// is unknown). A client over it is told the store is busy and retries.
    int maxConnections = 0;
    int maxPreAuthConnections = 128;  ///< connections still in their handshake, from anyone
    int maxPreAuthPerAddress = 32;    ///< of those, from one IPv4 address
  };

  /// Binds and listens (throws kSystemError naming the address on failure), then starts the
  /// serving thread.
  explicit StoreServer(const Options& options);
  StoreServer();
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port it listens on (the ephemeral one when Options::port was 0).
  int port() const;
  /// Connections dropped so far: strangers, rejected handshakes, protocol breakers.
  size_t droppedConnections() const;
  /// Connections that completed the handshake and are open now.
  size_t activeConnections() const;
  /// Waits until no connection that completed the handshake is open (each client has closed or
  /// died), or until `deadline`. Returns how many were still open (0: all gone). Cheap when they
  /// are already gone. For the rank hosting the store: its destroy must not strand ranks that are
  /// still connecting.
  size_t waitForClientsToLeave(Deadline deadline) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::bootstrap
