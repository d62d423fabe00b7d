// The client side of the TCP store.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "comm/bootstrap/address.h"
#include "comm/bootstrap/store_base.h"
#include "common/error.h"

namespace braid::bootstrap {

namespace wire {
struct Reply;
}

/// A Store reached over TCP at a StoreServer. Thread-safe, but calls are serialised: a get()
/// blocked on a missing key holds up this client's other calls until it returns (use one client
/// per thread if threads must set what others get). After a connection failure every later call
/// fails at once with the same error (no silent reconnect: a lost set would go unnoticed).
class TcpStore : public Store {
 public:
  struct Options {
    int worldSize = 0;          ///< sent in the handshake; 0 = do not check
    std::string secret;         ///< "" = jobSecret() (BRAID_SECRET)
    double timeoutSeconds = 0;  ///< deadline of set(key, value); 0 = BRAID_TIMEOUT (default 60)
    int rank = -1;              ///< this rank, named in errors; -1 = not a rank (a tool)
  };

  /// Connects and handshakes. Retries, with a short backoff, until `connectDeadline` whatever
  /// may pass: a refused connection (the server is not up yet), one reset or closed before the
  /// handshake reply (the server evicts connections that wait under a flood of strangers), a
  /// busy server. Throws kTimeout naming the rank, the address and the last failure when it never
  /// gets in. Fails at once, without retrying, on what retrying cannot fix: kRemoteError when the
  /// server rejects the secret or protocol version or is not a braid store, kInvalidUsage on a
  /// world size mismatch.
  TcpStore(const StoreAddress& address, const Options& options, Deadline connectDeadline);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value) override;
  void set(const std::string& key, const std::string& value, Deadline deadline);
  /// Blocks server-side until the key is set; throws kTimeout naming the key and the store
  /// address at the deadline, kRemoteError naming the address when the server goes away.
  std::string get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta, Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;

  /// The IPv4 address of this end of the connection (getsockname): an address of this host that
  /// reaches the store's host, so other hosts can usually reach this rank at it too.
  std::string localAddress() const { return localAddress_; }
  const StoreAddress& address() const { return address_; }

 private:
  wire::Reply call(const std::string& what, const std::string& request, Deadline replyDeadline);
  [[noreturn]] void breakConnection(ErrorCode code, const std::string& message);
  bool tryJoin(const std::string& ip, Deadline deadline, std::string* lastError);
  void connectOnce(const std::string& ip, Deadline deadline, std::string* lastError);
  void closeFd();

  StoreAddress address_;
  std::string addressText_;
  std::string who_;  ///< "rank N: " or "", the start of error messages
  Options options_;
  std::mutex mutex_;
  int fd_ = -1;
  std::string localAddress_;
  std::string broken_;  ///< the error that broke the connection, "" while healthy
  ErrorCode brokenCode_ = ErrorCode::kOk;
};

}  // namespace braid::bootstrap
