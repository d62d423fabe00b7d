// The tcp connection phase: the lower rank of each pair connects and says hello; the higher one
// accepts, checks every field (magic, version, world size, target rank, job id, secret) and
// answers with an Ack. A connection that fails any check is closed with one warning while the
// rank keeps waiting for the real peer until the deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/peer_key.h"
#include "transport/tcp/channels.h"
#include "transport/tcp/tcp.h"

namespace braid::transport::tcp {

namespace {

constexpr double kHandshakeSeconds = 5;  // a stray connection gets this long to say hello

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int pollMillis(Deadline deadline, int cap) { return std::min(deadline.millisLeft(), cap); }

// Blocking-style helpers over non-blocking sockets, bounded by `deadline`; false on EOF/error.
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
    poll(&p, 1, pollMillis(deadline, 100));
  }
  return true;
}

bool readAll(int fd, char* data, size_t bytes, Deadline deadline) {
  while (bytes > 0) {
    ssize_t n = ::recv(fd, data, bytes, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (deadline.expired()) return false;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, pollMillis(deadline, 100));
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

}  // namespace

void TcpTransport::connectPeers(KeyValue& kv, Deadline deadline) {
  const int rank = config_.rank;
  // 1. Connect to every higher tcp peer and say hello.
  for (int p = rank + 1; p < config_.size; ++p) {
    if (!peers_[p]) continue;
    std::string key = fmt::format("{}/tcp/{}", config_.jobId, p);
    std::string where;
    where = getPeerKey(kv, key, deadline, rank, p, "tcp", "publish its address");
    size_t colon = where.rfind(':');
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    BRAID_ENFORCE(colon != std::string::npos &&
                      inet_pton(AF_INET, where.substr(0, colon).c_str(), &addr.sin_addr) == 1,
                  ErrorCode::kInvalidUsage,
                  "rank {}: peer rank {} published a bad tcp address '{}'", rank, p, where);
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(where.substr(colon + 1))));
    int fd = -1;
    std::string lastError = "no attempt";
    while (fd < 0) {
      BRAID_ENFORCE(!deadline.expired(), ErrorCode::kTimeout,
                    "rank {}: tcp connect to peer rank {} at {} timed out: {}", rank, p, where,
                    lastError);
      int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (s < 0) failErrno(fmt::format("rank {}: tcp socket() for peer rank {}", rank, p), errno);
      int rc = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      int err = rc == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        pollfd pfd{s, POLLOUT, 0};
        if (poll(&pfd, 1, pollMillis(deadline, 1000)) > 0) {
          socklen_t len = sizeof err;
          getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        } else {
          err = ETIMEDOUT;
        }
      }
      if (err == 0) {
        fd = s;
      } else {
        lastError = errnoText(err);
        close(s);
        poll(nullptr, 0, std::min(20, deadline.millisLeft()));
      }
    }
    peers_[p]->fd = fd;
    std::string hello = encodeHello(config_.size, rank, p, config_.jobId, config_.secret);
    BRAID_ENFORCE(writeAll(fd, hello.data(), hello.size(), deadline), ErrorCode::kRemoteError,
                  "rank {}: tcp handshake to peer rank {} at {} failed while sending", rank, p,
                  where);
  }
  // 2. Accept every lower tcp peer.
  acceptPeers(deadline);
  // 3. Every higher peer acknowledges our hello.
  for (int p = rank + 1; p < config_.size; ++p) {
    if (!peers_[p]) continue;
    Ack ack;
    bool ok = readAll(peers_[p]->fd, reinterpret_cast<char*>(&ack), sizeof ack, deadline);
    BRAID_ENFORCE(ok && ack.magic == kAckMagic && ack.rank == p, ErrorCode::kRemoteError,
                  "rank {}: tcp handshake with peer rank {}: {}", rank, p,
                  deadline.expired() ? "timed out waiting for its acknowledgement"
                                     : "it closed the connection (secret/job/size mismatch?)");
  }
  for (auto& peer : peers_) {
    if (peer) setNoDelay(peer->fd);
  }
  close(listenFd_);  // every peer is here; later strays are refused by the kernel
  listenFd_ = -1;
  connected_ = true;
}

void TcpTransport::acceptPeers(Deadline deadline) {
  const int rank = config_.rank;
  struct Pending {
    int fd;
    std::string from;
    std::string buf;
    size_t got = 0;
    bool haveHello = false;
    Hello hello;
    Clock::time_point until;
  };
  std::vector<Pending> pending;
  int missing = 0;
  for (int p = 0; p < rank; ++p) missing += peers_[p] ? 1 : 0;

  auto reject = [&](Pending& c, const std::string& why) {
    BRAID_WARN("rank {}: rejected a tcp connection from {}: {}", rank, c.from, why);
    close(c.fd);
    c.fd = -1;
  };

  while (missing > 0) {
    if (deadline.expired()) {
      std::string who;
      for (int p = 0; p < rank; ++p) {
        if (peers_[p] && peers_[p]->fd < 0) who += (who.empty() ? "" : ", ") + std::to_string(p);
      }
      for (auto& c : pending) close(c.fd);
      fail(ErrorCode::kTimeout,
           "rank {}: tcp connect timed out waiting for peer rank(s) {} to connect", rank, who);
    }
    std::vector<pollfd> fds;
    fds.push_back({listenFd_, POLLIN, 0});
    int wait = pollMillis(deadline, 100);
    auto now = Clock::now();
    for (auto& c : pending) {
      fds.push_back({c.fd, POLLIN, 0});
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.until - now).count();
      wait = std::min<int>(wait, static_cast<int>(std::max<int64_t>(left + 1, 0)));
    }
    poll(fds.data(), fds.size(), wait);
    if (fds[0].revents != 0) {
      while (true) {
        int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        Pending c;
        c.fd = fd;
        c.from = peerAddress(fd);
        c.buf.resize(sizeof(Hello));
        c.until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(kHandshakeSeconds));
        pending.push_back(std::move(c));
      }
    }
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      Pending& c = pending[i];
      if (fds[i + 1].revents == 0) {
        if (Clock::now() >= c.until) {
          reject(c, fmt::format("no complete handshake within {} s", kHandshakeSeconds));
        }
        continue;
      }
      ssize_t n = ::recv(c.fd, c.buf.data() + c.got, c.buf.size() - c.got, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        reject(c, "closed during the handshake");
        continue;
      }
      if (n < 0) continue;
      c.got += static_cast<size_t>(n);
      if (c.got < c.buf.size()) continue;
      if (!c.haveHello) {
        std::memcpy(&c.hello, c.buf.data(), sizeof(Hello));
        const Hello& h = c.hello;
        std::string why = helloError(h, config_.size, rank, [&](int peer) -> std::string {
          if (!peers_[peer]) {
            return fmt::format("rank {} is not a tcp peer that connects to rank {}", peer, rank);
          }
          if (peers_[peer]->fd >= 0) return fmt::format("rank {} is already connected", peer);
          return "";
        });
        if (!why.empty()) {
          reject(c, why);
          continue;
        }
        c.haveHello = true;
        c.buf.resize(handshakeBytes(h));
        if (c.got < c.buf.size()) continue;
      }
      std::string jobId = c.buf.substr(sizeof(Hello), c.hello.jobIdBytes);
      std::string secret = c.buf.substr(sizeof(Hello) + c.hello.jobIdBytes);
      if (jobId != config_.jobId) {
        reject(c, fmt::format("rank {} of job '{}', not '{}'", c.hello.rank, jobId, config_.jobId));
        continue;
      }
      if (secret != config_.secret) {
        reject(c, fmt::format("rank {} presented a wrong secret", c.hello.rank));
        continue;
      }
      Ack ack;
      ack.rank = rank;
      if (!writeAll(c.fd, reinterpret_cast<const char*>(&ack), sizeof ack, deadline)) {
        reject(c, "closed before the acknowledgement");
        continue;
      }
      peers_[c.hello.rank]->fd = c.fd;
      c.fd = -1;
      --missing;
    }
    std::erase_if(pending, [](const Pending& c) { return c.fd < 0; });
  }
  for (auto& c : pending) reject(c, "all peers were already connected");
}

}  // namespace braid::transport::tcp
