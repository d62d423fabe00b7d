#include "comm/bootstrap/server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <list>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/bootstrap/counter.h"
#include "comm/bootstrap/drop_log.h"
#include "comm/bootstrap/lobby.h"
#include "comm/bootstrap/net.h"
#include "comm/bootstrap/secret.h"
#include "comm/bootstrap/wire.h"
#include "common/error.h"
#include "common/log.h"

namespace braid::bootstrap {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// Ranks' connections allowed beyond the world size (a rank retrying while its old connection is
// still being torn down), and the bound while the world size is unknown.
constexpr int kRankMargin = 16;
constexpr int kUnknownWorldCap = 1024;
// Connections accepted per loop turn, so a flood cannot starve the ranks already connected.
constexpr int kAcceptsPerTurn = 256;

// One connection that completed the handshake (a rank, or a tool holding the job secret).
struct Connection {
  int fd = -1;
  std::string peer;  // "a.b.c.d:port" for log lines
  std::string in;    // received, not yet parsed
  std::string out;   // to send
  size_t outSent = 0;
  bool dead = false;  // closed; to be removed
  // A get/wait waiting for keys; while set, further input is left unparsed.
  std::optional<wire::Request> pending;
  Clock::time_point pendingUntil;
};

std::string replyFrame(wire::ReplyStatus status, int64_t number, const std::string& text) {
  wire::Writer body;
  body.u8(static_cast<uint8_t>(status));
  body.u8(0);
  body.u8(0);
  body.u8(0);
  body.i64(number);
  body.str(text);
  wire::Writer frame;
  frame.u32(static_cast<uint32_t>(body.bytes().size()));
  frame.raw(body.bytes());
  return std::move(frame.bytes());
}

Clock::time_point afterMillis(uint32_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

struct StoreServer::Impl {
  Options options;
  int listenFd = -1;
  int wakeFd = -1;
  int port = 0;
  int worldSize = 0;  // only touched by the serving thread after start
  std::string secret;
  std::atomic<bool> stop{false};
  std::atomic<size_t> active{0};
  std::unique_ptr<DropLog> dropLog;
  std::unique_ptr<Lobby> lobby;
  std::list<Connection> conns;
  Clock::time_point acceptPausedUntil;  // after accept() fails (e.g. out of fds), retry later
  Clock::time_point acceptWarnedAt;     // accept() failures are logged at most every 5 s
  size_t acceptFailures = 0;
  std::unordered_map<std::string, std::string> values;
  std::thread thread;

  void run();
  void serveOnce();
  void acceptSome();
  void welcome(Hello hello);
  void readFrom(Connection& c);
  void flush(Connection& c);
  void drop(Connection& c, const std::string& reason);
  void processFrames(Connection& c);
  void execute(Connection& c, wire::Request request);
  bool tryComplete(Connection& c, const wire::Request& request, bool timedOut);
  void resolvePending();
  void send(Connection& c, std::string bytes);
  size_t connectionCap() const;
  std::string tag() const { return "bootstrap store on port " + std::to_string(port); }
};

StoreServer::StoreServer() : StoreServer(Options{}) {}

StoreServer::StoreServer(const Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = options;
  s.worldSize = options.worldSize;
  s.secret = options.secret.empty() ? jobSecret() : options.secret;
  BRAID_ENFORCE(s.secret.size() <= wire::kMaxSecretBytes, ErrorCode::kInvalidUsage,
                "bootstrap store: the job secret is {} bytes, more than the limit of {}",
                s.secret.size(), wire::kMaxSecretBytes);
  BRAID_ENFORCE(options.handshakeTimeoutSeconds > 0 && options.maxPreAuthConnections > 0 &&
                    options.maxPreAuthPerAddress > 0 && options.maxConnections >= 0,
                ErrorCode::kInvalidUsage,
                "bootstrap store: handshake timeout {} s and connection limits {}, {}, {} must be "
                "positive",
                options.handshakeTimeoutSeconds, options.maxPreAuthConnections,
                options.maxPreAuthPerAddress, options.maxConnections);
  sockaddr_in addr = net::ipv4Sockaddr(options.bindAddress, options.port);
  s.listenFd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listenFd < 0) failErrno("bootstrap store: socket()", errno);
  int one = 1;
  ::setsockopt(s.listenFd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.listenFd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(s.listenFd, SOMAXCONN) != 0) {
    int err = errno;
    ::close(s.listenFd);
    failErrno(fmt::format(
                  "bootstrap store: cannot listen on {}:{}{}", options.bindAddress, options.port,
                  err == EADDRNOTAVAIL ? " (not an address of this host; the store listens on the "
                                         "address ranks are told to use, MASTER_ADDR, unless "
                                         "BRAID_STORE_BIND says otherwise, e.g. 0.0.0.0)"
                                       : ""),
              err);
  }
  socklen_t len = sizeof addr;
  ::getsockname(s.listenFd, reinterpret_cast<sockaddr*>(&addr), &len);
  s.port = ntohs(addr.sin_port);
  s.wakeFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.wakeFd < 0) {
    int err = errno;
    ::close(s.listenFd);
    failErrno("bootstrap store: eventfd()", err);
  }
  s.dropLog = std::make_unique<DropLog>(s.tag());
  Lobby::Limits limits;
  limits.maxTotal = static_cast<size_t>(options.maxPreAuthConnections);
  limits.maxPerAddress = static_cast<size_t>(options.maxPreAuthPerAddress);
  limits.handshakeTime = seconds(options.handshakeTimeoutSeconds);
  s.lobby = std::make_unique<Lobby>(limits, *s.dropLog);
  s.thread = std::thread([&s] { s.run(); });
  BRAID_INFO("{}: listening on {}:{}", s.tag(), options.bindAddress, s.port);
}

StoreServer::~StoreServer() {
  Impl& s = *impl_;
  s.stop.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(s.wakeFd, &one, sizeof one);
  (void)ignored;
  if (s.thread.joinable()) s.thread.join();
  for (auto& c : s.conns) {
    if (!c.dead) ::close(c.fd);
  }
  s.lobby.reset();  // closes the connections still in their handshake
  ::close(s.listenFd);
  ::close(s.wakeFd);
}

int StoreServer::port() const { return impl_->port; }
size_t StoreServer::droppedConnections() const { return impl_->dropLog->total(); }
size_t StoreServer::activeConnections() const { return impl_->active.load(); }

void StoreServer::Impl::run() {
  while (!stop.load()) {
    try {
      serveOnce();
    } catch (const std::exception& e) {
      // Keep serving: one bad event must not take the rendezvous down for every rank.
      BRAID_WARN("{}: unexpected error: {}", tag(), e.what());
    }
  }
}

void StoreServer::Impl::serveOnce() {
  auto now = Clock::now();
  // The earliest handshake, pending-request or log deadline bounds the poll.
  Clock::time_point wakeAt =
      std::min({now + std::chrono::seconds(1), lobby->expire(now), dropLog->flush(now)});
  std::vector<pollfd> fds;
  std::vector<Connection*> order;
  fds.push_back({wakeFd, POLLIN, 0});
  bool acceptMore = now >= acceptPausedUntil;
  fds.push_back({listenFd, static_cast<short>(acceptMore ? POLLIN : 0), 0});
  if (!acceptMore) wakeAt = std::min(wakeAt, acceptPausedUntil);
  lobby->pollFds(fds);
  const size_t firstConn = fds.size();
  for (auto& c : conns) {
    short events = POLLIN;
    if (c.outSent < c.out.size()) events |= POLLOUT;
    fds.push_back({c.fd, events, 0});
    order.push_back(&c);
    if (c.pending) wakeAt = std::min(wakeAt, c.pendingUntil);
  }
  int rc = ::poll(fds.data(), fds.size(), Deadline::at(wakeAt).millisLeft());
  if (rc < 0 && errno != EINTR) failErrno("poll()", errno);
  if (stop.load()) return;
  if (rc < 0) rc = 0;
  std::vector<Hello> hellos;
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    uint64_t value;
    ssize_t ignored = ::read(wakeFd, &value, sizeof value);
    (void)ignored;
  }
  // No pollfd entry is used after a list it refers to changes: the lobby's, then the ranks'.
  lobby->onEvents(fds.data() + 2, hellos);
  for (size_t i = 0; i < order.size(); ++i) {
    Connection& c = *order[i];
    short revents = fds[firstConn + i].revents;
    if (c.dead) continue;
    if (revents & POLLOUT) flush(c);
    if (!c.dead && (revents & (POLLIN | POLLHUP | POLLERR))) readFrom(c);
  }
  for (auto& hello : hellos) welcome(std::move(hello));
  if (rc > 0 && (fds[1].revents & POLLIN)) acceptSome();
  now = Clock::now();
  for (auto& c : conns) {
    if (!c.dead && c.pending && now >= c.pendingUntil) {
      wire::Request request = std::move(*c.pending);
      c.pending.reset();
      tryComplete(c, request, /*timedOut=*/true);
      processFrames(c);
    }
  }
  for (auto it = conns.begin(); it != conns.end();) {
    if (it->dead) {
      active.fetch_sub(1);
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
}

void StoreServer::Impl::acceptSome() {
  for (int i = 0; i < kAcceptsPerTurn; ++i) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    int fd =
        ::accept4(listenFd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors or memory: the connection stays queued; retry shortly rather than
        // spin on a listening socket that stays readable.
        auto now = Clock::now();
        ++acceptFailures;
        if (now >= acceptWarnedAt + std::chrono::seconds(5)) {
          BRAID_WARN(
              "{}: accept() failed {} time(s) in the last 5 s, last: {}; retrying every "
              "100 ms",
              tag(), acceptFailures, net::errnoText(errno));
          acceptWarnedAt = now;
          acceptFailures = 0;
        }
        acceptPausedUntil = now + std::chrono::milliseconds(100);
      }
      return;
    }
    if (auto hello = lobby->add(fd, addr)) welcome(std::move(*hello));
  }
}

size_t StoreServer::Impl::connectionCap() const {
  if (options.maxConnections > 0) return static_cast<size_t>(options.maxConnections);
  return static_cast<size_t>(worldSize > 0 ? worldSize + kRankMargin : kUnknownWorldCap);
}

void StoreServer::Impl::welcome(Hello hello) {
  auto status = wire::HandshakeStatus::kOk;
  std::string reason;
  if (hello.version != wire::kVersion) {
    status = wire::HandshakeStatus::kBadVersion;
    reason =
        fmt::format("protocol version {} (this store speaks {})", hello.version, wire::kVersion);
  } else if (!secretsEqual(hello.secret, secret)) {
    status = wire::HandshakeStatus::kBadSecret;
    reason = "wrong job secret (BRAID_SECRET)";
  } else if (hello.worldSize != 0 && worldSize != 0 &&
             static_cast<int>(hello.worldSize) != worldSize) {
    status = wire::HandshakeStatus::kBadWorldSize;
    reason = fmt::format("world size {} (this job has {} ranks)", hello.worldSize, worldSize);
  } else if (conns.size() >= connectionCap()) {
    status = wire::HandshakeStatus::kBusy;
    reason = fmt::format("already serving {} clients (limit {}); told to retry", conns.size(),
                         connectionCap());
  }
  wire::Writer reply;
  reply.u32(wire::kMagic);
  reply.u32(static_cast<uint32_t>(status));
  reply.u32(wire::kVersion);
  reply.u32(static_cast<uint32_t>(worldSize));
  if (status != wire::HandshakeStatus::kOk) {
    // Tell the client why (a misconfigured rank should fail at once, a busy one retry), then
    // close; the 16 bytes fit any fresh socket's buffer.
    ssize_t sent =
        ::send(hello.fd, reply.bytes().data(), reply.bytes().size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)sent;
    ::close(hello.fd);
    dropLog->dropped(net::endpointText(hello.peer), reason);
    return;
  }
  if (worldSize == 0 && hello.worldSize != 0) worldSize = static_cast<int>(hello.worldSize);
  net::setNoDelay(hello.fd);
  Connection& c = conns.emplace_back();
  c.fd = hello.fd;
  c.peer = net::endpointText(hello.peer);
  active.fetch_add(1);
  BRAID_TRACE("{}: client {} joined", tag(), c.peer);
  send(c, std::move(reply.bytes()));
}

void StoreServer::Impl::drop(Connection& c, const std::string& reason) {
  if (c.dead) return;
  dropLog->dropped(c.peer, reason);
  ::close(c.fd);
  c.dead = true;
}

void StoreServer::Impl::send(Connection& c, std::string bytes) {
  if (c.outSent == c.out.size()) {
    c.out = std::move(bytes);
    c.outSent = 0;
  } else {
    c.out.append(bytes);
  }
  flush(c);
}

void StoreServer::Impl::flush(Connection& c) {
  while (c.outSent < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.outSent, c.out.size() - c.outSent, MSG_NOSIGNAL);
    if (n > 0) {
      c.outSent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // The peer went away; nothing to report to it.
    BRAID_TRACE("{}: connection from {} closed while sending", tag(), c.peer);
    ::close(c.fd);
    c.dead = true;
    return;
  }
  c.out.clear();
  c.outSent = 0;
}

void StoreServer::Impl::readFrom(Connection& c) {
  bool eof = false;
  while (true) {
    // A client waits for each reply, so even a blocked one has no reason to send much more.
    if (c.in.size() > 2 * wire::kMaxFrameBytes) {
      drop(c, "sent too much data without waiting for replies");
      return;
    }
    size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t n = ::recv(c.fd, c.in.data() + old, kReadChunk, 0);
    c.in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // EOF or a reset
    break;
  }
  // Complete frames that arrived before an EOF still run (a client may set and close).
  processFrames(c);
  if (!eof || c.dead) return;
  BRAID_TRACE("{}: client {} disconnected", tag(), c.peer);
  ::close(c.fd);
  c.dead = true;
}

void StoreServer::Impl::processFrames(Connection& c) {
  while (!c.pending && !c.dead) {
    std::optional<size_t> len;
    try {
      len = wire::completeFrame(c.in.data(), c.in.size());
    } catch (const wire::ParseError& e) {
      drop(c, e.what());
      return;
    }
    if (!len) return;
    wire::Request request;
    try {
      request = wire::decodeRequest(c.in.data() + 4, *len);
    } catch (const wire::ParseError& e) {
      drop(c, fmt::format("malformed request: {}", e.what()));
      return;
    }
    c.in.erase(0, 4 + *len);
    execute(c, std::move(request));
  }
}

void StoreServer::Impl::execute(Connection& c, wire::Request request) {
  switch (request.op) {
    case wire::Op::kSet:
      values[request.strings[0]] = std::move(request.strings[1]);
      send(c, replyFrame(wire::ReplyStatus::kOk, 0, ""));
      resolvePending();
      return;
    case wire::Op::kAdd: {
      std::string& text = values[request.strings[0]];
      int64_t sum = 0;
      std::string why;
      if (!addToCounter(text, request.delta, &sum, &why)) {
        send(c, replyFrame(wire::ReplyStatus::kError, 0, why));
        return;
      }
      text = std::to_string(sum);
      send(c, replyFrame(wire::ReplyStatus::kOk, sum, ""));
      resolvePending();
      return;
    }
    case wire::Op::kGet:
    case wire::Op::kWait:
      if (tryComplete(c, request, /*timedOut=*/false)) return;
      c.pendingUntil = afterMillis(request.timeoutMs);
      c.pending = std::move(request);
      return;
  }
}

bool StoreServer::Impl::tryComplete(Connection& c, const wire::Request& request, bool timedOut) {
  const std::string* missing = nullptr;
  for (const auto& key : request.strings) {
    if (values.find(key) == values.end()) {
      missing = &key;
      break;
    }
  }
  if (missing == nullptr) {
    std::string value = request.op == wire::Op::kGet ? values[request.strings[0]] : "";
    send(c, replyFrame(wire::ReplyStatus::kOk, 0, value));
    return true;
  }
  if (timedOut || request.timeoutMs == 0) {
    send(c, replyFrame(wire::ReplyStatus::kTimeout, 0, *missing));
    return true;
  }
  return false;
}

void StoreServer::Impl::resolvePending() {
  for (auto& c : conns) {
    if (c.dead || !c.pending) continue;
    if (tryComplete(c, *c.pending, /*timedOut=*/false)) {
      c.pending.reset();
      // Requests it pipelined behind the blocked one can run now.
      processFrames(c);
    }
  }
}

// Polls the count the serving thread keeps: a close is seen within one poll() round of it.
size_t StoreServer::waitForClientsToLeave(Deadline deadline) const {
  while (true) {
    const size_t open = impl_->active.load();
    if (open == 0 || deadline.expired()) return open;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace braid::bootstrap
