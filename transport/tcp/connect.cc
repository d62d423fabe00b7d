// The tcp connection phase, net.h's connect and accept per peer (ChannelEndpoint::connectPeers
// drives them, by its deadline): the lower rank of each pair dials and says hello; the higher one
// accepts, checks every field (magic, version, world size, target rank, job id, secret) and
// answers with an Ack. One socket carries both directions, so a pair is up both ways once the
// handshake is done. Nothing blocks: a dial in progress, a handshake half read and the listener
// are looked at in connectWait(). A connection that fails any check is closed with one warning
// while the rank keeps waiting for the real peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/log.h"
#include "transport/tcp/channels.h"
#include "transport/tcp/tcp.h"

namespace braid::transport::tcp {

namespace {

constexpr double kHandshakeSeconds = 5;  // a stray connection gets this long to say hello
constexpr auto kDialTimeout = std::chrono::seconds(1);      // one connect() attempt
constexpr auto kDialRetry = std::chrono::milliseconds(20);  // after a refused one

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Writes a handshake message (tens of bytes, into a fresh socket: it goes at once), bounded by
// `deadline`; false on EOF/error.
bool writeAll(int fd, const char* data, size_t bytes, Deadline deadline) {
  while (bytes > 0) {
    ssize_t n = ::send(fd, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (deadline.expired()) return false;
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, std::min(deadline.millisLeft(), 100));
  }
  return true;
}

std::string peerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char text[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return fmt::format("{}:{}", text, ntohs(addr.sin_port));
}

int millisUntil(Clock::time_point when) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1000));
}

}  // namespace

Handshakes::~Handshakes() {
  for (Dial& d : dials) {
    if (d.fd >= 0) close(d.fd);
  }
  for (Incoming& c : incoming) {
    if (c.fd >= 0) close(c.fd);
  }
}

Handshakes& TcpTransport::handshakes() {
  if (!handshakes_) {
    handshakes_ = std::make_unique<Handshakes>();
    handshakes_->dials.resize(static_cast<size_t>(config_.size));
  }
  return *handshakes_;
}

std::string TcpTransport::handleKey(const PeerState& peer) const {
  // Only the lower rank of a pair dials, to the address the higher one published.
  return peer.rank > config_.rank ? fmt::format("{}/tcp/{}", config_.jobId, peer.rank) : "";
}

net::Issue TcpTransport::connect(PeerState& peer, const std::string& where, KeyValue&) {
  if (peer.fd >= 0) return net::Issue::kDone;
  if (peer.rank < config_.rank) return net::Issue::kNotNow;  // it dials us: connectWait accepts
  const int rank = config_.rank;
  const int p = peer.rank;
  Dial& d = handshakes().dials[p];
  if (d.where.empty()) {
    size_t colon = where.rfind(':');
    d.addr.sin_family = AF_INET;
    int port = 0;
    BRAID_ENFORCE(colon != std::string::npos &&
                      inet_pton(AF_INET, where.substr(0, colon).c_str(), &d.addr.sin_addr) == 1 &&
                      std::sscanf(where.c_str() + colon + 1, "%d", &port) == 1 && port > 0 &&
                      port < 65536,
                  ErrorCode::kInvalidUsage,
                  "rank {}: peer rank {} published a bad tcp address '{}'", rank, p, where);
    d.addr.sin_port = htons(static_cast<uint16_t>(port));
    d.where = where;
  }
  auto retry = [&](int err) {
    d.lastError = errnoText(err);
    close(d.fd);
    d.fd = -1;
    d.stage = Dial::kIdle;
    d.retryAt = Clock::now() + kDialRetry;
  };
  if (d.stage == Dial::kIdle) {
    if (Clock::now() < d.retryAt) return net::Issue::kNotNow;
    d.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d.fd < 0) failErrno(fmt::format("rank {}: tcp socket() for peer rank {}", rank, p), errno);
    const int rc = ::connect(d.fd, reinterpret_cast<sockaddr*>(&d.addr), sizeof d.addr);
    const int err = rc == 0 ? 0 : errno;
    if (err != 0 && err != EINPROGRESS) {
      retry(err);
      return net::Issue::kNotNow;
    }
    d.stage = Dial::kConnecting;
    d.started = Clock::now();
  }
  if (d.stage == Dial::kConnecting) {
    pollfd pfd{d.fd, POLLOUT, 0};
    if (poll(&pfd, 1, 0) <= 0) {
      if (Clock::now() - d.started > kDialTimeout) retry(ETIMEDOUT);
      return net::Issue::kNotNow;
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(d.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      retry(err);
      return net::Issue::kNotNow;
    }
    const std::string hello = encodeHello(config_.size, rank, p, config_.jobId, config_.secret);
    BRAID_ENFORCE(writeAll(d.fd, hello.data(), hello.size(), Deadline::after(kHandshakeSeconds)),
                  ErrorCode::kRemoteError,
                  "rank {}: tcp handshake to peer rank {} at {} failed while sending", rank, p,
                  d.where);
    d.stage = Dial::kAwaitingAck;
  }
  // kAwaitingAck: read what came of the Ack.
  ssize_t n =
      ::recv(d.fd, reinterpret_cast<char*>(&d.ack) + d.got, sizeof d.ack - d.got, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return net::Issue::kNotNow;
  }
  BRAID_ENFORCE(n > 0, ErrorCode::kRemoteError,
                "rank {}: tcp handshake with peer rank {}: it closed the connection "
                "(secret/job/size mismatch?)",
                rank, p);
  d.got += static_cast<size_t>(n);
  if (d.got < sizeof d.ack) return net::Issue::kNotNow;
  BRAID_ENFORCE(d.ack.magic == kAckMagic && d.ack.rank == p, ErrorCode::kRemoteError,
                "rank {}: tcp handshake with peer rank {}: its acknowledgement is malformed", rank,
                p);
  peer.fd = std::exchange(d.fd, -1);
  return net::Issue::kDone;
}

net::Issue TcpTransport::accept(PeerState& peer) {
  // One socket carries both directions: up once connect() or the listener finished the
  // handshake.
  return peer.fd >= 0 ? net::Issue::kDone : net::Issue::kNotNow;
}

std::string TcpTransport::awaiting(const PeerState& peer, bool) const {
  if (peer.rank < config_.rank) return "to connect";
  const Dial* d = handshakes_ ? &handshakes_->dials[peer.rank] : nullptr;
  if (d == nullptr) return "its address";
  if (d->stage == Dial::kAwaitingAck) return fmt::format("its acknowledgement, at {}", d->where);
  return fmt::format("to accept a connection at {}: {}", d->where, d->lastError);
}

void TcpTransport::connectWait(int timeoutMillis, std::unique_lock<std::mutex>& lock) {
  Handshakes& hs = handshakes();
  std::vector<pollfd> fds;
  if (listenFd_ >= 0) fds.push_back({listenFd_, POLLIN, 0});
  const size_t firstIncoming = fds.size();
  const size_t polledIncoming = hs.incoming.size();
  int wait = timeoutMillis;
  for (const auto& c : hs.incoming) {
    fds.push_back({c.fd, POLLIN, 0});
    wait = std::min(wait, millisUntil(c.until));
  }
  for (const auto& d : hs.dials) {
    if (d.stage == Dial::kConnecting) fds.push_back({d.fd, POLLOUT, 0});
    if (d.stage == Dial::kAwaitingAck) fds.push_back({d.fd, POLLIN, 0});
    if (d.stage == Dial::kIdle && !d.where.empty()) {
      wait = std::min(wait, millisUntil(d.retryAt));
    }
  }
  lock.unlock();
  poll(fds.data(), fds.size(), wait);
  lock.lock();
  // The dials move on in connect(); here the listener and the handshakes being read.
  if (listenFd_ >= 0 && fds[0].revents != 0) {
    while (true) {
      int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      Incoming c;
      c.fd = fd;
      c.from = peerAddress(fd);
      c.buf.resize(sizeof(Hello));
      c.until = after(kHandshakeSeconds);
      hs.incoming.push_back(std::move(c));
    }
  }
  for (size_t i = 0; i < hs.incoming.size(); ++i) {
    // A new connection is read at once (nothing there yet: no harm).
    const bool ready = i >= polledIncoming || fds[firstIncoming + i].revents != 0;
    readHandshake(hs.incoming[i], ready);
  }
  std::erase_if(hs.incoming, [](const Incoming& c) { return c.fd < 0; });
}

void TcpTransport::readHandshake(Incoming& c, bool ready) {
  const int rank = config_.rank;
  auto reject = [&](const std::string& why) {
    BRAID_WARN("rank {}: rejected a tcp connection from {}: {}", rank, c.from, why);
    close(c.fd);
    c.fd = -1;
  };
  if (!ready) {
    if (Clock::now() >= c.until) {
      reject(fmt::format("no complete handshake within {} s", kHandshakeSeconds));
    }
    return;
  }
  ssize_t n = ::recv(c.fd, c.buf.data() + c.got, c.buf.size() - c.got, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    reject("closed during the handshake");
    return;
  }
  if (n < 0) return;
  c.got += static_cast<size_t>(n);
  if (c.got < c.buf.size()) return;
  if (!c.haveHello) {
    std::memcpy(&c.hello, c.buf.data(), sizeof(Hello));
    std::string why = helloError(c.hello, config_.size, rank, [&](int peer) -> std::string {
      if (!peers_[peer]) {
        return fmt::format("rank {} is not a tcp peer that connects to rank {}", peer, rank);
      }
      if (peers_[peer]->fd >= 0) return fmt::format("rank {} is already connected", peer);
      return "";
    });
    if (!why.empty()) {
      reject(why);
      return;
    }
    c.haveHello = true;
    c.buf.resize(handshakeBytes(c.hello));
    if (c.got < c.buf.size()) return;
  }
  std::string jobId = c.buf.substr(sizeof(Hello), c.hello.jobIdBytes);
  std::string secret = c.buf.substr(sizeof(Hello) + c.hello.jobIdBytes);
  if (jobId != config_.jobId) {
    reject(fmt::format("rank {} of job '{}', not '{}'", c.hello.rank, jobId, config_.jobId));
    return;
  }
  if (secret != config_.secret) {
    reject(fmt::format("rank {} presented a wrong secret", c.hello.rank));
    return;
  }
  Ack ack;
  ack.rank = rank;
  if (!writeAll(c.fd, reinterpret_cast<const char*>(&ack), sizeof ack,
                Deadline::after(kHandshakeSeconds))) {
    reject("closed before the acknowledgement");
    return;
  }
  peers_[c.hello.rank]->fd = std::exchange(c.fd, -1);
}

void TcpTransport::connected() {
  for (auto& peer : peers_) {
    if (peer) setNoDelay(peer->fd);
  }
  if (handshakes_) {
    for (auto& c : handshakes_->incoming) {
      BRAID_WARN("rank {}: rejected a tcp connection from {}: all peers were already connected",
                 config_.rank, c.from);
    }
    handshakes_.reset();
  }
  close(listenFd_);  // every peer is here; later strays are refused by the kernel
  listenFd_ = -1;
}

}  // namespace braid::transport::tcp
