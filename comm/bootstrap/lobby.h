// Connections that have not completed the store's handshake yet (internal to comm/bootstrap).
#pragma once

#include <netinet/in.h>
#include <poll.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "braid/deadline.hpp"
#include "comm/bootstrap/drop_log.h"
#include "comm/bootstrap/wire.h"

namespace braid::bootstrap {

/// A handshake read in full: who sent it and what it says. The receiver owns `fd`.
struct Hello {
  int fd = -1;
  sockaddr_in peer{};
  uint32_t version = 0;
  uint32_t worldSize = 0;
  std::string secret;
};

/// Holds accepted connections until their handshake has arrived, so that strangers who connect
/// and say nothing cannot crowd out the job's ranks. Bounded in every way a stranger could
/// stretch it:
///  - number: at most `maxTotal` connections, at most `maxPerAddress` from one IPv4 address.
///    A newcomer over a limit evicts the oldest connection (of its address, or of all) rather than
///    being refused: a flood then only shortens how long a silent connection may wait, and a rank,
///    which sends its handshake right after connecting, still gets in (or is evicted and retries).
///  - time: a connection must complete its handshake within `handshakeTime`.
///  - memory: the handshake is read into a fixed buffer of kHandshakeBytes + kMaxSecretBytes,
///    exactly as many bytes as it has; nothing else is allocated before it is complete.
/// Every drop is reported to the DropLog. Used by the serving thread only.
class Lobby {
 public:
  struct Limits {
    size_t maxTotal = 128;
    size_t maxPerAddress = 32;
    Clock::duration handshakeTime = std::chrono::seconds(3);
  };

  Lobby(const Limits& limits, DropLog& log);
  ~Lobby();
  Lobby(const Lobby&) = delete;
  Lobby& operator=(const Lobby&) = delete;

  /// Takes a just-accepted connection, evicting another when a limit is reached, and reads what
  /// it sent already. Returns its hello when that completed it.
  std::optional<Hello> add(int fd, const sockaddr_in& peer);
  /// Appends one pollfd per waiting connection; pass the same entries, after poll(), to
  /// onEvents() before any other call.
  void pollFds(std::vector<pollfd>& fds);
  /// Reads from the connections poll() found readable; appends the hellos that completed.
  void onEvents(const pollfd* fds, std::vector<Hello>& complete);
  /// Drops connections past their handshake deadline; returns the earliest deadline left
  /// (Clock::time_point::max() when none).
  Clock::time_point expire(Clock::time_point now);
  size_t size() const { return waiting_.size(); }

 private:
  struct Guest {
    int fd = -1;
    sockaddr_in peer{};
    Clock::time_point by;
    uint16_t have = 0;  // bytes of `hello` received
    std::array<char, wire::kHandshakeBytes + wire::kMaxSecretBytes> hello;
  };
  using Iter = std::list<Guest>::iterator;

  // Reads what `g` sent; true when it is gone from the lobby (complete, or dropped).
  bool read(Iter g, std::optional<Hello>* complete);
  // Drops `g` with a reset and a logged reason.
  void drop(Iter g, const std::string& reason);
  // Removes `g` from the bookkeeping (not closing its fd).
  void forget(Iter g);
  Iter oldestFrom(uint32_t address);

  Limits limits_;
  DropLog& log_;
  std::list<Guest> waiting_;  // oldest first
  std::unordered_map<uint32_t, size_t> perAddress_;
  std::vector<Iter> polled_;  // the entries of the last pollFds(), in order
};

}  // namespace braid::bootstrap
