#include "comm/bootstrap/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "comm/bootstrap/net.h"
#include "comm/bootstrap/secret.h"
#include "comm/bootstrap/wire.h"
#include "common/log.h"

namespace braid::bootstrap {
namespace {

// A server answers a blocked get/wait at the deadline it was sent; allow this much for the
// answer to travel before the client calls the store unreachable.
constexpr double kReplyGraceSeconds = 2.0;
// Each handshake attempt waits this long for the reply; longer than the server's default pre-auth
// deadline (3 s), after which it answers or drops the connection.
constexpr double kHandshakeAttemptSeconds = 5.0;
// Retries back off from 10 ms to this.
constexpr auto kMaxBackoff = std::chrono::milliseconds(250);

uint32_t timeoutMillis(Deadline deadline) {
  int ms = deadline.millisLeft();
  return static_cast<uint32_t>(std::max(ms, 0));
}

Deadline withGrace(Deadline deadline) {
  if (deadline.when() == Deadline::never().when()) return deadline;
  return Deadline::at(deadline.when() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(kReplyGraceSeconds)));
}

std::string describeKeys(const std::vector<std::string>& keys) {
  return keys.size() == 1 ? "'" + keys[0] + "'" : std::to_string(keys.size()) + " keys";
}

}  // namespace

TcpStore::TcpStore(const StoreAddress& address, const Options& options, Deadline connectDeadline)
    : address_(address), addressText_(address.toString()), options_(options) {
  if (options_.secret.empty()) options_.secret = jobSecret();
  if (options_.timeoutSeconds <= 0) options_.timeoutSeconds = defaultTimeoutSeconds();
  if (options_.rank >= 0) who_ = fmt::format("rank {}: ", options_.rank);
  BRAID_ENFORCE(address.port > 0 && address.port <= 65535, ErrorCode::kInvalidUsage,
                "{}bootstrap store address {} has no valid port", who_, addressText_);
  BRAID_ENFORCE(options_.secret.size() <= wire::kMaxSecretBytes, ErrorCode::kInvalidUsage,
                "{}the job secret is {} bytes, more than the limit of {}", who_,
                options_.secret.size(), wire::kMaxSecretBytes);
  const std::string ip = resolveIPv4(address.host);
  // What went wrong, by kind, in the order first seen: the final error lists them all.
  std::vector<std::pair<std::string, int>> failures;
  int attempts = 0;
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    ++attempts;
    std::string failure;
    if (tryJoin(ip, connectDeadline, &failure)) return;
    auto same = std::find_if(failures.begin(), failures.end(),
                             [&](const auto& f) { return f.first == failure; });
    if (same == failures.end()) {
      failures.emplace_back(failure, 1);
    } else {
      ++same->second;
    }
    if (connectDeadline.expired()) {
      std::string what;
      for (const auto& [text, count] : failures) {
        what += (what.empty() ? "" : "; ") + text + (count > 1 ? fmt::format(" (x{})", count) : "");
      }
      fail(ErrorCode::kTimeout,
           "{}could not join the bootstrap store at {}{} before the deadline: {} attempt(s): {}; "
           "is rank 0 running and MASTER_ADDR/MASTER_PORT right?",
           who_, addressText_, ip == address.host ? "" : " (" + ip + ")", attempts, what);
    }
    auto nap = std::min<Clock::duration>(backoff, connectDeadline.when() - Clock::now());
    if (nap > Clock::duration::zero()) std::this_thread::sleep_for(nap);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

TcpStore::~TcpStore() { closeFd(); }

void TcpStore::closeFd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool TcpStore::tryJoin(const std::string& ip, Deadline deadline, std::string* lastError) {
  connectOnce(ip, deadline, lastError);
  if (fd_ < 0) return false;
  localAddress_ = net::localIp(fd_);

  // Handshake: prove we belong to the job, learn whether the server agrees.
  wire::Writer hello;
  hello.u32(wire::kMagic);
  hello.u32(wire::kVersion);
  hello.u32(static_cast<uint32_t>(options_.worldSize));
  hello.u32(static_cast<uint32_t>(options_.secret.size()));
  hello.raw(options_.secret);
  // A server answers or drops a handshake within seconds; one that does neither lost it.
  const Deadline attempt = deadline.earlier(Deadline::after(kHandshakeAttemptSeconds));
  int err = 0;
  net::Io io = net::sendAll(fd_, hello.bytes().data(), hello.bytes().size(), attempt, &err);
  char answer[16];
  if (io == net::Io::kOk) io = net::recvAll(fd_, answer, sizeof answer, attempt, &err);
  switch (io) {
    case net::Io::kOk:
      break;
    case net::Io::kTimeout:
      closeFd();
      *lastError = deadline.expired()
                       ? "no handshake reply before the deadline"
                       : fmt::format("no handshake reply within {} s", kHandshakeAttemptSeconds);
      return false;
    case net::Io::kClosed:
      closeFd();
      // No reply: the server dropped the connection before reading the handshake, as it does
      // to the oldest waiting connections under a flood. A rejection would have said why.
      *lastError = err == 0 ? "the store closed the connection before answering the handshake"
                            : "the store reset the connection before answering the handshake (" +
                                  net::errnoText(err) + ")";
      return false;
    case net::Io::kError:
      closeFd();
      *lastError = "handshake failed: " + net::errnoText(err);
      return false;
  }
  wire::Reader in(answer, sizeof answer);
  uint32_t magic = in.u32();
  auto status = static_cast<wire::HandshakeStatus>(in.u32());
  uint32_t serverVersion = in.u32();
  uint32_t serverWorld = in.u32();
  if (magic == wire::kMagic && status == wire::HandshakeStatus::kOk) return true;
  closeFd();
  BRAID_ENFORCE(magic == wire::kMagic, ErrorCode::kRemoteError,
                "{}{} is not a braid bootstrap store (bad handshake reply)", who_, addressText_);
  switch (status) {
    case wire::HandshakeStatus::kBusy:
      *lastError = fmt::format("the store is busy serving its {} ranks and more", serverWorld);
      return false;
    case wire::HandshakeStatus::kBadVersion:
      fail(ErrorCode::kRemoteError,
           "{}bootstrap store at {} speaks protocol version {}, this rank {} (mixed braid "
           "builds?)",
           who_, addressText_, serverVersion, wire::kVersion);
    case wire::HandshakeStatus::kBadWorldSize:
      fail(ErrorCode::kInvalidUsage,
           "{}this rank has world size {} but the bootstrap store at {} serves {} ranks", who_,
           options_.worldSize, addressText_, serverWorld);
    case wire::HandshakeStatus::kBadSecret:
      fail(ErrorCode::kRemoteError,
           "{}bootstrap store at {} rejected this rank's job secret (BRAID_SECRET differs from "
           "the one the store was started with)",
           who_, addressText_);
    default:
      fail(ErrorCode::kRemoteError, "{}bootstrap store at {} refused the handshake (status {})",
           who_, addressText_, static_cast<uint32_t>(status));
  }
}

void TcpStore::connectOnce(const std::string& ip, Deadline deadline, std::string* lastError) {
  sockaddr_in addr = net::ipv4Sockaddr(ip, address_.port);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) failErrno(who_ + "socket() for the bootstrap store at " + addressText_, errno);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = rc == 0 ? 0 : errno;
  if (rc != 0 && errno == EINPROGRESS) {
    // Cap each attempt so a dropped SYN is retried rather than waited on for the whole deadline.
    Deadline attempt = deadline.earlier(Deadline::after(1.0));
    pollfd p{fd, POLLOUT, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, attempt.millisLeft());
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) {
      ::close(fd);
      *lastError = "connect() got no answer within 1 s";
      return;
    } else {
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
  }
  if (err != 0) {
    ::close(fd);
    *lastError = "connect(): " + net::errnoText(err);
    return;
  }
  net::setNoDelay(fd);
  fd_ = fd;
}

void TcpStore::breakConnection(ErrorCode code, const std::string& message) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  broken_ = message;
  brokenCode_ = code;
  throw Error(code, message);
}

wire::Reply TcpStore::call(const std::string& what, const std::string& request,
                           Deadline replyDeadline) {
  if (!broken_.empty()) {
    fail(brokenCode_, "{} on the bootstrap store at {} failed: the connection broke earlier: {}",
         what, addressText_, broken_);
  }
  int err = 0;
  net::Io io = net::sendAll(fd_, request.data(), request.size(), replyDeadline, &err);
  char header[4];
  if (io == net::Io::kOk) io = net::recvAll(fd_, header, sizeof header, replyDeadline, &err);
  uint32_t len = 0;
  std::string body;
  if (io == net::Io::kOk) {
    len = wire::loadU32(header);
    if (len > wire::kMaxFrameBytes || len < 16) {
      breakConnection(ErrorCode::kRemoteError,
                      fmt::format("{}: bootstrap store at {} sent a malformed reply ({} bytes)",
                                  what, addressText_, len));
    }
    body.resize(len);
    io = net::recvAll(fd_, body.data(), len, replyDeadline, &err);
  }
  switch (io) {
    case net::Io::kOk:
      break;
    case net::Io::kTimeout:
      breakConnection(ErrorCode::kTimeout,
                      fmt::format("{}: no reply from the bootstrap store at {} before the deadline",
                                  what, addressText_));
    case net::Io::kClosed:
      breakConnection(ErrorCode::kRemoteError,
                      fmt::format("{}: the bootstrap store at {} closed the connection (did the "
                                  "process serving it, usually rank 0, exit?)",
                                  what, addressText_));
    case net::Io::kError:
      breakConnection(ErrorCode::kRemoteError,
                      fmt::format("{}: connection to the bootstrap store at {} failed: {}", what,
                                  addressText_, net::errnoText(err)));
  }
  wire::Reply reply;
  try {
    reply = wire::decodeReply(body.data(), body.size());
  } catch (const wire::ParseError& e) {
    breakConnection(ErrorCode::kRemoteError,
                    fmt::format("{}: bootstrap store at {} sent a malformed reply: {}", what,
                                addressText_, e.what()));
  }
  return reply;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  set(key, value, Deadline::after(options_.timeoutSeconds));
}

void TcpStore::set(const std::string& key, const std::string& value, Deadline deadline) {
  BRAID_ENFORCE(key.size() <= kMaxKeyBytes, ErrorCode::kInvalidUsage,
                "store set: key of {} bytes exceeds the limit of {}", key.size(), kMaxKeyBytes);
  BRAID_ENFORCE(value.size() <= kMaxValueBytes, ErrorCode::kInvalidUsage,
                "store set('{}'): value of {} bytes exceeds the limit of {}", key, value.size(),
                kMaxValueBytes);
  wire::Request request{wire::Op::kSet, 0, 0, {key, value}};
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Reply reply = call(fmt::format("set('{}', {} bytes)", key, value.size()),
                           wire::encodeRequest(request), deadline);
  BRAID_ENFORCE(reply.status == wire::ReplyStatus::kOk, ErrorCode::kRemoteError,
                "store set('{}') at {} failed: {}", key, addressText_, reply.text);
}

std::string TcpStore::get(const std::string& key, Deadline deadline) {
  BRAID_ENFORCE(key.size() <= kMaxKeyBytes, ErrorCode::kInvalidUsage,
                "store get: key of {} bytes exceeds the limit of {}", key.size(), kMaxKeyBytes);
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request request{wire::Op::kGet, timeoutMillis(deadline), 0, {key}};
  wire::Reply reply =
      call(fmt::format("get('{}')", key), wire::encodeRequest(request), withGrace(deadline));
  if (reply.status == wire::ReplyStatus::kTimeout) {
    fail(ErrorCode::kTimeout,
         "store get: key '{}' was not set at the bootstrap store at {} before the deadline", key,
         addressText_);
  }
  BRAID_ENFORCE(reply.status == wire::ReplyStatus::kOk, ErrorCode::kRemoteError,
                "store get('{}') at {} failed: {}", key, addressText_, reply.text);
  return std::move(reply.text);
}

int64_t TcpStore::add(const std::string& key, int64_t delta, Deadline deadline) {
  BRAID_ENFORCE(key.size() <= kMaxKeyBytes, ErrorCode::kInvalidUsage,
                "store add: key of {} bytes exceeds the limit of {}", key.size(), kMaxKeyBytes);
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request request{wire::Op::kAdd, 0, delta, {key}};
  wire::Reply reply =
      call(fmt::format("add('{}', {})", key, delta), wire::encodeRequest(request), deadline);
  BRAID_ENFORCE(reply.status == wire::ReplyStatus::kOk, ErrorCode::kInvalidUsage,
                "store add('{}', {}) at {} failed: {}", key, delta, addressText_, reply.text);
  return reply.number;
}

void TcpStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  if (keys.empty()) return;
  BRAID_ENFORCE(keys.size() <= kMaxWaitKeys, ErrorCode::kInvalidUsage,
                "store wait on {} keys exceeds the limit of {} keys", keys.size(), kMaxWaitKeys);
  for (const auto& key : keys) {
    BRAID_ENFORCE(key.size() <= kMaxKeyBytes, ErrorCode::kInvalidUsage,
                  "store wait: key of {} bytes exceeds the limit of {}", key.size(), kMaxKeyBytes);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request request{wire::Op::kWait, timeoutMillis(deadline), 0, keys};
  wire::Reply reply = call(fmt::format("wait({})", describeKeys(keys)),
                           wire::encodeRequest(request), withGrace(deadline));
  if (reply.status == wire::ReplyStatus::kTimeout) {
    fail(ErrorCode::kTimeout,
         "store wait on {}: key '{}' was not set at the bootstrap store at {} before the deadline",
         describeKeys(keys), reply.text, addressText_);
  }
  BRAID_ENFORCE(reply.status == wire::ReplyStatus::kOk, ErrorCode::kRemoteError,
                "store wait({}) at {} failed: {}", describeKeys(keys), addressText_, reply.text);
}

}  // namespace braid::bootstrap
