// The TCP side of the store: a key-value server with its own thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "braid/deadline.hpp"

namespace braid::bootstrap {

/// Serves one job's key-value map over TCP to many TcpStore clients from one poll() thread with
/// non-blocking sockets. A connection that fails the handshake (wrong magic, version, world
/// size or secret), sends nothing within handshakeTimeoutSeconds, or breaks the framing (an
/// over-long or malformed frame) is dropped with one BRAID_WARN line; the others keep being
/// served. Destroying the server closes every connection and joins the thread promptly, even
/// with clients attached (they then see kRemoteError).
class StoreServer {
 public:
  struct Options {
    int port = 0;                         ///< 0 = an ephemeral port (see port())
    std::string bindAddress = "0.0.0.0";  ///< IPv4 address to listen on
    int worldSize = 0;                    ///< ranks in the job; 0 = taken from the first client
    std::string secret;                   ///< "" = jobSecret() (BRAID_SECRET)
    double handshakeTimeoutSeconds = 10;  ///< a new connection must complete its handshake by then
    int maxConnections = 4096;            ///< further connections are dropped with a warning
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
  /// Connections dropped for breaking the protocol so far (for tests and logs).
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
