#include "comm/bootstrap/lobby.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "comm/bootstrap/net.h"

namespace braid::bootstrap {
namespace {

// Closes with a reset: no reply is owed, and the store keeps no TIME_WAIT state for strangers.
void resetAndClose(int fd) {
  linger hard{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  ::close(fd);
}

}  // namespace

Lobby::Lobby(const Limits& limits, DropLog& log) : limits_(limits), log_(log) {
  if (limits_.maxTotal < 1) limits_.maxTotal = 1;
  if (limits_.maxPerAddress < 1) limits_.maxPerAddress = 1;
}

Lobby::~Lobby() {
  for (auto& g : waiting_) ::close(g.fd);
}

std::optional<Hello> Lobby::add(int fd, const sockaddr_in& peer) {
  const uint32_t address = peer.sin_addr.s_addr;
  auto same = perAddress_.find(address);
  if (same != perAddress_.end() && same->second >= limits_.maxPerAddress) {
    drop(oldestFrom(address),
         fmt::format("evicted: {} connections from this address were in their handshake (limit "
                     "{}) and this was the oldest",
                     same->second, limits_.maxPerAddress));
  } else if (waiting_.size() >= limits_.maxTotal) {
    drop(waiting_.begin(),
         fmt::format("evicted: {} connections were in their handshake (limit {}) and this was the "
                     "oldest",
                     waiting_.size(), limits_.maxTotal));
  }
  Guest& g = waiting_.emplace_back();
  g.fd = fd;
  g.peer = peer;
  g.by = Clock::now() + limits_.handshakeTime;
  ++perAddress_[address];
  // A rank sends its handshake as soon as it is connected: it is usually here already.
  std::optional<Hello> complete;
  read(std::prev(waiting_.end()), &complete);
  return complete;
}

void Lobby::pollFds(std::vector<pollfd>& fds) {
  polled_.clear();
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    fds.push_back({it->fd, POLLIN, 0});
    polled_.push_back(it);
  }
}

void Lobby::onEvents(const pollfd* fds, std::vector<Hello>& complete) {
  // Each entry is handled once and only it may leave the list, so the others stay valid.
  for (size_t i = 0; i < polled_.size(); ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    std::optional<Hello> hello;
    read(polled_[i], &hello);
    if (hello) complete.push_back(std::move(*hello));
  }
  polled_.clear();
}

Clock::time_point Lobby::expire(Clock::time_point now) {
  // Deadlines are accept time plus a constant: the oldest expires first.
  while (!waiting_.empty() && waiting_.front().by <= now) {
    drop(waiting_.begin(),
         fmt::format("no complete handshake within {}s (silent or slow client)",
                     std::chrono::duration<double>(limits_.handshakeTime).count()));
  }
  return waiting_.empty() ? Clock::time_point::max() : waiting_.front().by;
}

bool Lobby::read(Iter g, std::optional<Hello>* complete) {
  while (true) {
    size_t want;
    try {
      want = wire::helloBytesWanted(g->hello.data(), g->have);
    } catch (const wire::ParseError& e) {
      drop(g, e.what());
      return true;
    }
    if (want == 0) break;
    ssize_t n = ::recv(g->fd, g->hello.data() + g->have, want, 0);
    if (n > 0) {
      g->have = static_cast<uint16_t>(g->have + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    drop(g, g->have == 0
                ? std::string("closed before sending a handshake")
                : fmt::format("closed after {} bytes of an incomplete handshake", g->have));
    return true;
  }
  wire::ClientHello fields = wire::decodeHello(g->hello.data(), g->have);
  Hello hello;
  hello.version = fields.version;
  hello.worldSize = fields.worldSize;
  hello.secret = std::move(fields.secret);
  hello.fd = g->fd;
  hello.peer = g->peer;
  forget(g);
  *complete = std::move(hello);
  return true;
}

void Lobby::drop(Iter g, const std::string& reason) {
  log_.dropped(net::endpointText(g->peer), reason);
  resetAndClose(g->fd);
  forget(g);
}

void Lobby::forget(Iter g) {
  auto count = perAddress_.find(g->peer.sin_addr.s_addr);
  if (count != perAddress_.end() && --count->second == 0) perAddress_.erase(count);
  waiting_.erase(g);
}

Lobby::Iter Lobby::oldestFrom(uint32_t address) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->peer.sin_addr.s_addr == address) return it;
  }
  return waiting_.begin();  // not reached: the caller counted one
}

}  // namespace braid::bootstrap
