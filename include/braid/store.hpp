// The rendezvous store ranks find each other through, installed as <braid/store.hpp>.
//
// A Store is a small key-value map shared by all ranks of a job: set/get (get blocks until the
// key exists), add (an atomic counter) and wait (for several keys). Communicator::fromStore
// creates a communicator over any Store: one of braid's (below) or the caller's own (a PyTorch
// c10d store adapter, a file system, ...). braid's own:
//   - makeInMemoryStore(): for ranks that are threads of one process;
//   - TcpStoreServer + connectTcpStore(): for ranks that are processes. One process serves, every
//     rank connects (the serving one too). Each connection proves it belongs to the job with the
//     job secret; strangers who reach the port cannot lock the ranks out.
#pragma once

#include <braid/deadline.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace braid {

/// A key-value map shared by the ranks of one job. Implementations must be thread-safe: a
/// communicator's creation calls them from the creating thread only, but several communicators
/// may be created over one store at once (Options::storePrefix keeps their keys apart).
class Store {
 public:
  virtual ~Store() = default;
  /// Stores `value` under `key`, overwriting.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Blocks until `key` is set; throws braid::Error kTimeout naming the key at the deadline.
  virtual std::string get(const std::string& key, Deadline deadline) = 0;
  /// Atomically adds `delta` to the integer stored at `key` (a missing key counts as 0) and
  /// returns the new value, stored as decimal text (get() on it returns e.g. "3"). Throws
  /// kInvalidUsage when the key holds something that is not an integer or the sum overflows.
  virtual int64_t add(const std::string& key, int64_t delta, Deadline deadline) = 0;
  /// Blocks until every key in `keys` is set; throws kTimeout naming the first missing key at
  /// the deadline.
  virtual void wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
};

/// A Store in this process's memory, for ranks that are threads of one process: share the one
/// pointer among them. Blocking calls sleep until a set (no polling).
std::shared_ptr<Store> makeInMemoryStore();

/// Serves a Store over TCP until destroyed. Only connections that present the job secret and the
/// world size get in.
class TcpStoreServer {
 public:
  struct Options {
    /// The IPv4 address to listen on: the one the ranks are told to connect to, so the store is
    /// not reachable on the host's other interfaces ("0.0.0.0" = every interface).
    std::string bindAddress = "127.0.0.1";
    int port = 0;        ///< 0 = any free port (see port())
    int worldSize = 0;   ///< ranks that will connect; 0 = do not check
    std::string secret;  ///< "" = BRAID_SECRET (or the insecure default)
  };
  /// Listens at once; throws kSystemError naming the address when it cannot.
  explicit TcpStoreServer(const Options& options);
  TcpStoreServer(TcpStoreServer&&) noexcept;
  TcpStoreServer& operator=(TcpStoreServer&&) noexcept;
  /// Closes the port and every connection.
  ~TcpStoreServer();

  /// The port it listens on.
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// How connectTcpStore reaches a TcpStoreServer.
struct TcpStoreOptions {
  std::string host;           ///< the server's host name or IPv4 address
  int port = 0;               ///< the server's port
  int worldSize = 0;          ///< must match the server's; 0 = do not check
  std::string secret;         ///< "" = BRAID_SECRET (or the insecure default)
  int rank = -1;              ///< this rank, named in errors; -1 = not a rank
  double timeoutSeconds = 0;  ///< deadline to connect and of each set(); 0 = BRAID_TIMEOUT
};

/// Connects to a TcpStoreServer, retrying while it is not up yet until the timeout. Throws
/// kTimeout naming the address when it never gets in, kRemoteError when the server rejects the
/// secret. Calls through one connection are serialised: give each rank thread its own.
std::shared_ptr<Store> connectTcpStore(const TcpStoreOptions& options);

}  // namespace braid
