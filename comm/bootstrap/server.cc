#include "comm/bootstrap/server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <list>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/bootstrap/net.h"
#include "comm/bootstrap/secret.h"
#include "comm/bootstrap/wire.h"
#include "common/error.h"
#include "common/log.h"

namespace braid::bootstrap {
namespace {

constexpr size_t kReadChunk = 64 << 10;

// One accepted connection and where it is in the protocol.
struct Connection {
  int fd = -1;
  std::string peer;    // "a.b.c.d:port" for log lines
  bool ready = false;  // handshake done
  Clock::time_point handshakeBy;
  std::string in;   // received, not yet parsed
  std::string out;  // to send
  size_t outSent = 0;
  bool closing = false;  // close once `out` is flushed (a rejected handshake's reply)
  bool dead = false;     // to be removed
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

}  // namespace

struct StoreServer::Impl {
  Options options;
  int listenFd = -1;
  int wakeFd = -1;
  int port = 0;
  int worldSize = 0;  // only touched by the serving thread after start
  std::string secret;
  std::atomic<bool> stop{false};
  std::atomic<size_t> dropped{0};
  std::atomic<size_t> active{0};
  std::list<Connection> conns;
  Clock::time_point acceptPausedUntil;  // after accept() fails (e.g. out of fds), retry later
  std::unordered_map<std::string, std::string> values;
  std::thread thread;

  void run();
  void serveOnce();
  void acceptAll();
  void readFrom(Connection& c);
  void flush(Connection& c);
  void drop(Connection& c, const std::string& reason);
  void handshake(Connection& c);
  void processFrames(Connection& c);
  void execute(Connection& c, wire::Request request);
  bool tryComplete(Connection& c, const wire::Request& request, bool timedOut);
  void resolvePending();
  void send(Connection& c, std::string bytes);
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
  sockaddr_in addr = net::ipv4Sockaddr(options.bindAddress, options.port);
  s.listenFd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listenFd < 0) failErrno("bootstrap store: socket()", errno);
  int one = 1;
  ::setsockopt(s.listenFd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.listenFd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(s.listenFd, 1024) != 0) {
    int err = errno;
    ::close(s.listenFd);
    failErrno(
        fmt::format("bootstrap store: cannot listen on {}:{}", options.bindAddress, options.port),
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
  for (auto& c : s.conns) ::close(c.fd);
  ::close(s.listenFd);
  ::close(s.wakeFd);
}

int StoreServer::port() const { return impl_->port; }
size_t StoreServer::droppedConnections() const { return impl_->dropped.load(); }
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
  std::vector<pollfd> fds;
  std::vector<Connection*> order;
  fds.push_back({wakeFd, POLLIN, 0});
  bool acceptMore = Clock::now() >= acceptPausedUntil;
  fds.push_back({listenFd, static_cast<short>(acceptMore ? POLLIN : 0), 0});
  // The earliest handshake or pending-request deadline bounds the poll.
  Clock::time_point wakeAt = Clock::now() + std::chrono::seconds(1);
  if (!acceptMore && acceptPausedUntil < wakeAt) wakeAt = acceptPausedUntil;
  for (auto& c : conns) {
    short events = POLLIN;
    if (c.outSent < c.out.size()) events |= POLLOUT;
    fds.push_back({c.fd, events, 0});
    order.push_back(&c);
    if (!c.ready && c.handshakeBy < wakeAt) wakeAt = c.handshakeBy;
    if (c.pending && c.pendingUntil < wakeAt) wakeAt = c.pendingUntil;
  }
  int timeoutMs = Deadline::at(wakeAt).millisLeft();
  int rc = ::poll(fds.data(), fds.size(), timeoutMs);
  if (rc < 0 && errno != EINTR) failErrno("poll()", errno);
  if (stop.load()) return;
  if (rc > 0) {
    if (fds[0].revents & POLLIN) {
      uint64_t value;
      ssize_t ignored = ::read(wakeFd, &value, sizeof value);
      (void)ignored;
    }
    if (fds[1].revents & POLLIN) acceptAll();
    for (size_t i = 0; i < order.size(); ++i) {
      Connection& c = *order[i];
      short revents = fds[i + 2].revents;
      if (c.dead) continue;
      if (revents & POLLOUT) flush(c);
      if (!c.dead && (revents & (POLLIN | POLLHUP | POLLERR))) readFrom(c);
    }
  }
  auto now = Clock::now();
  for (auto& c : conns) {
    if (c.dead) continue;
    if (!c.ready && !c.closing && now >= c.handshakeBy) {
      drop(c, fmt::format("no complete handshake within {}s (silent or slow client)",
                          options.handshakeTimeoutSeconds));
    } else if (c.pending && now >= c.pendingUntil) {
      wire::Request request = std::move(*c.pending);
      c.pending.reset();
      tryComplete(c, request, /*timedOut=*/true);
      processFrames(c);
    }
  }
  for (auto it = conns.begin(); it != conns.end();) {
    if (it->dead) {
      ::close(it->fd);
      if (it->ready) active.fetch_sub(1);
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
}

void StoreServer::Impl::acceptAll() {
  while (true) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    int fd =
        ::accept4(listenFd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors or memory: the connection stays queued; retry shortly rather than
        // spin on a listening socket that stays readable.
        BRAID_WARN("{}: accept() failed: {}; retrying in 100 ms", tag(), net::errnoText(errno));
        acceptPausedUntil = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    std::string peer = net::endpointText(addr);
    if (conns.size() >= static_cast<size_t>(options.maxConnections)) {
      BRAID_WARN("{}: dropped connection from {}: already serving {} connections", tag(), peer,
                 conns.size());
      dropped.fetch_add(1);
      ::close(fd);
      continue;
    }
    net::setNoDelay(fd);
    Connection c;
    c.fd = fd;
    c.peer = std::move(peer);
    c.handshakeBy =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options.handshakeTimeoutSeconds));
    conns.push_back(std::move(c));
  }
}

void StoreServer::Impl::drop(Connection& c, const std::string& reason) {
  if (c.dead) return;
  BRAID_WARN("{}: dropped connection from {}: {}", tag(), c.peer, reason);
  dropped.fetch_add(1);
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
    c.dead = true;
    return;
  }
  c.out.clear();
  c.outSent = 0;
  if (c.closing) c.dead = true;
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
    if (n > 0) {
      if (c.closing) c.in.clear();  // a rejected client: ignore what it still sends
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // EOF or a reset
    break;
  }
  if (c.closing) {
    if (eof) c.dead = true;
    return;
  }
  if (!c.ready) handshake(c);
  // Complete frames that arrived before an EOF still run (a client may set and close).
  if (c.ready && !c.dead) processFrames(c);
  if (!eof || c.dead || c.closing) return;
  if (!c.ready) {
    drop(c, c.in.empty()
                ? "closed before sending a handshake"
                : fmt::format("closed after {} bytes of an incomplete handshake", c.in.size()));
  } else {
    BRAID_TRACE("{}: client {} disconnected", tag(), c.peer);
    c.dead = true;
  }
}

void StoreServer::Impl::handshake(Connection& c) {
  if (c.in.size() >= 4 && wire::loadU32(c.in.data()) != wire::kMagic) {
    drop(c, fmt::format("garbage instead of a handshake (first bytes 0x{:08x}, not braid's magic)",
                        wire::loadU32(c.in.data())));
    return;
  }
  if (c.in.size() < wire::kHandshakeBytes) return;
  wire::Reader head(c.in.data(), wire::kHandshakeBytes);
  head.u32();
  uint32_t version = head.u32();
  uint32_t clientWorld = head.u32();
  uint32_t secretLen = head.u32();
  if (secretLen > wire::kMaxSecretBytes) {
    drop(c, fmt::format("handshake secret of {} bytes exceeds the limit of {}", secretLen,
                        wire::kMaxSecretBytes));
    return;
  }
  if (c.in.size() < wire::kHandshakeBytes + secretLen) return;
  std::string secretGiven = c.in.substr(wire::kHandshakeBytes, secretLen);
  c.in.erase(0, wire::kHandshakeBytes + secretLen);

  auto status = wire::HandshakeStatus::kOk;
  std::string reason;
  if (version != wire::kVersion) {
    status = wire::HandshakeStatus::kBadVersion;
    reason = fmt::format("protocol version {} (this store speaks {})", version, wire::kVersion);
  } else if (!secretsEqual(secretGiven, secret)) {
    status = wire::HandshakeStatus::kBadSecret;
    reason = "wrong job secret (BRAID_SECRET)";
  } else if (clientWorld != 0 && worldSize != 0 && static_cast<int>(clientWorld) != worldSize) {
    status = wire::HandshakeStatus::kBadWorldSize;
    reason = fmt::format("world size {} (this job has {} ranks)", clientWorld, worldSize);
  }
  wire::Writer reply;
  reply.u32(wire::kMagic);
  reply.u32(static_cast<uint32_t>(status));
  reply.u32(wire::kVersion);
  reply.u32(static_cast<uint32_t>(worldSize));
  if (status != wire::HandshakeStatus::kOk) {
    // Tell the client why (a misconfigured rank should learn it), then close.
    BRAID_WARN("{}: dropped connection from {}: {}", tag(), c.peer, reason);
    dropped.fetch_add(1);
    c.closing = true;
    c.in.clear();
    send(c, std::move(reply.bytes()));
    return;
  }
  if (worldSize == 0 && clientWorld != 0) worldSize = static_cast<int>(clientWorld);
  c.ready = true;
  active.fetch_add(1);
  BRAID_TRACE("{}: client {} joined", tag(), c.peer);
  send(c, std::move(reply.bytes()));
}

void StoreServer::Impl::processFrames(Connection& c) {
  while (!c.pending && !c.dead && !c.closing && c.in.size() >= 4) {
    uint32_t len = wire::loadU32(c.in.data());
    if (len > wire::kMaxFrameBytes) {
      drop(c, fmt::format("frame of {} bytes exceeds the limit of {}", len, wire::kMaxFrameBytes));
      return;
    }
    if (c.in.size() < 4 + size_t{len}) return;
    wire::Request request;
    try {
      request = wire::decodeRequest(c.in.data() + 4, len);
    } catch (const wire::ParseError& e) {
      drop(c, fmt::format("malformed request: {}", e.what()));
      return;
    }
    c.in.erase(0, 4 + size_t{len});
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
      int64_t current = 0;
      if (!text.empty()) {
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
        if (ec != std::errc() || end != text.data() + text.size()) {
          send(c, replyFrame(wire::ReplyStatus::kError, 0, "the key holds a non-integer value"));
          return;
        }
      }
      current += request.delta;
      text = std::to_string(current);
      send(c, replyFrame(wire::ReplyStatus::kOk, current, ""));
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
