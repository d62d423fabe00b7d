// The tcp transport. One connection per peer pair (the lower rank connects), all channel indices
// multiplexed on it as frames (transport/tcp/wire.h). A progress thread per endpoint polls every
// socket (epoll, non-blocking I/O): it writes posted send slots as kData frames, reads kData frames
// straight into the receiver's K slots of the channel, and returns kCredit frames (cumulative
// released count) as the user releases slots; a sender has at most K messages not yet released
// by the receiver per channel. It rings the endpoint's doorbell on every arrival, credit, abort
// and connection loss. User threads wake it through an eventfd only when it announced a sleep
// (the doorbell's Dekker protocol again), so a busy channel costs no system call per message.
#include "transport/tcp/tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/tcp/wire.h"

namespace braid::transport::tcp {

namespace {

constexpr double kHandshakeSeconds = 5;  // a stray connection gets this long to say hello
constexpr double kDrainSeconds = 2;      // destructor: flushing posted messages
constexpr double kLingerSeconds = 1;     // destructor: waiting for the peers' acks
constexpr int kSpinPolls = 100;          // non-blocking polls before the thread sleeps
constexpr int kSleepMillis = 100;

struct SlotInfo {
  uint64_t size = 0;
  MessageMeta meta;
};

std::string errnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof buf);
}

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

/// One peer's connection. The output state is guarded by `mutex` (the progress thread and, for an
/// inline flush after post/release, the user thread write); the input state belongs to the
/// progress thread.
struct PeerLink {
  int rank = -1;
  int fd = -1;
  std::atomic<bool> alive{true};
  std::mutex mutex;
  bool finSent = false;
  bool wantOut = false;  // EPOLLOUT registered: the socket buffer was full
  // Output: control frames (credits, abort) go between data frames.
  std::string control;
  size_t controlOff = 0;
  bool inFrame = false;
  int frameChannel = 0;
  FrameHeader frame;
  size_t frameOff = 0;
  int nextChannel = 0;
  // Input.
  FrameHeader inHeader;
  size_t inHeaderGot = 0;
  bool inBody = false;
  char* inDst = nullptr;
  size_t inBodyGot = 0;
  std::string reason;
};

class TcpSendChannel final : public SendChannel {
 public:
  TcpSendChannel(TcpTransport* owner, PeerLink* link, const EndpointConfig& c, int peer)
      : owner_(owner),
        link_(link),
        k_(static_cast<uint64_t>(c.slots)),
        slotBytes_(c.slotBytes),
        info_(c.slots),
        peer_(peer) {}

  void* tryAcquire() override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    if (p - credited_.load(std::memory_order_acquire) >= k_) return nullptr;
    // Allocated on first use so that unused channels cost no memory (new char[] leaves the
    // pages untouched).
    if (!buffer_) buffer_.reset(new char[k_ * slotBytes_]);
    return slot(p);
  }

  void post(size_t bytes, const MessageMeta& meta) override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(bytes <= slotBytes_, ErrorCode::kInvalidUsage,
                  "tcp post to peer {}: {} bytes exceed the slot size {}", peer_, bytes,
                  slotBytes_);
    BRAID_ENFORCE(buffer_ && p - credited_.load(std::memory_order_acquire) < k_,
                  ErrorCode::kInvalidUsage, "tcp post to peer {} without a slot from tryAcquire()",
                  peer_);
    info_[p % k_] = {bytes, meta};
    posted_.store(p + 1, std::memory_order_release);
    owner_->flushSoon(*link_);
  }

  size_t slotBytes() const override { return slotBytes_; }
  int peer() const override { return peer_; }

  char* slot(uint64_t n) { return buffer_.get() + (n % k_) * slotBytes_; }

  TcpTransport* owner_;
  PeerLink* link_;
  uint64_t k_;
  size_t slotBytes_;
  std::unique_ptr<char[]> buffer_;
  std::vector<SlotInfo> info_;
  int peer_;
  alignas(64) std::atomic<uint64_t> posted_{0};    // written by the user
  alignas(64) std::atomic<uint64_t> credited_{0};  // written by the progress thread
  uint64_t written_ = 0;                           // progress thread: frames fully sent
};

class TcpRecvChannel final : public RecvChannel {
 public:
  TcpRecvChannel(TcpTransport* owner, PeerLink* link, const EndpointConfig& c, int peer)
      : owner_(owner),
        link_(link),
        k_(static_cast<uint64_t>(c.slots)),
        creditBatch_(1),
        slotBytes_(c.slotBytes),
        info_(c.slots),
        peer_(peer) {}

  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    if (r == arrived_.load(std::memory_order_acquire)) return nullptr;
    const SlotInfo& info = info_[r % k_];
    if (bytes != nullptr) *bytes = info.size;
    if (meta != nullptr) *meta = info.meta;
    return slot(r);
  }

  void release() override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(r < arrived_.load(std::memory_order_acquire), ErrorCode::kInvalidUsage,
                  "tcp release from peer {} with no message peeked", peer_);
    released_.store(r + 1, std::memory_order_release);
    if (r + 1 - creditsSent_.load(std::memory_order_relaxed) >= creditBatch_) {
      owner_->flushSoon(*link_);
    }
  }

  int peer() const override { return peer_; }

  char* slot(uint64_t n) { return buffer_.get() + (n % k_) * slotBytes_; }

  TcpTransport* owner_;
  PeerLink* link_;
  uint64_t k_;
  // Releases per credit frame. 1: a released slot must reach the sender even when the receiver
  // then waits on something else (a ring blocked on its own sends would deadlock otherwise).
  // Credits still coalesce while a frame is being written.
  uint64_t creditBatch_;
  size_t slotBytes_;
  std::unique_ptr<char[]> buffer_;  // allocated by the progress thread on the first frame
  std::vector<SlotInfo> info_;
  int peer_;
  alignas(64) std::atomic<uint64_t> arrived_{0};   // written by the progress thread
  alignas(64) std::atomic<uint64_t> released_{0};  // written by the user
  std::atomic<uint64_t> creditsSent_{0};           // written under the link's mutex
};

TcpTransport::TcpTransport(const EndpointConfig& config, KeyValue& kv)
    : config_(config), links_(config.size) {
  const int rank = config.rank;
  listenFd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) failErrno(fmt::format("rank {}: tcp socket()", rank), errno);
  int one = 1;
  setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  if (bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(listenFd_);
    failErrno(fmt::format("rank {}: tcp bind(0.0.0.0:0)", rank), err);
  }
  if (listen(listenFd_, std::max(128, config.size)) != 0) {
    int err = errno;
    close(listenFd_);
    failErrno(fmt::format("rank {}: tcp listen()", rank), err);
  }
  socklen_t len = sizeof addr;
  getsockname(listenFd_, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string host = config.advertiseAddress.empty() ? "127.0.0.1" : config.advertiseAddress;
  for (int p = 0; p < config.size; ++p) {
    if (p == rank || config.peerKinds[p] != Kind::kTcp) continue;
    links_[p] = std::make_unique<PeerLink>();
    links_[p]->rank = p;
  }
  sends_.resize(static_cast<size_t>(config.size) * config.channels);
  recvs_.resize(static_cast<size_t>(config.size) * config.channels);
  for (int p = 0; p < config.size; ++p) {
    if (!links_[p]) continue;
    for (int c = 0; c < config.channels; ++c) {
      PeerLink* link = links_[p].get();
      sends_[p * config.channels + c] = std::make_unique<TcpSendChannel>(this, link, config, p);
      recvs_[p * config.channels + c] = std::make_unique<TcpRecvChannel>(this, link, config, p);
    }
  }
  try {
    kv.set(fmt::format("{}/tcp/{}", config.jobId, rank),
           fmt::format("{}:{}", host, ntohs(addr.sin_port)));
  } catch (...) {
    close(listenFd_);  // the destructor does not run for a throwing constructor
    throw;
  }
}

TcpTransport::~TcpTransport() {
  stopping_.store(true);
  if (eventFd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(eventFd_, &one, sizeof one);
    (void)ignored;
  }
  if (thread_.joinable()) thread_.join();
  for (auto& link : links_) {
    if (link && link->fd >= 0) close(link->fd);
  }
  if (listenFd_ >= 0) close(listenFd_);
  if (epollFd_ >= 0) close(epollFd_);
  if (eventFd_ >= 0) close(eventFd_);
}

void TcpTransport::connectPeers(KeyValue& kv, Deadline deadline) {
  const int rank = config_.rank;
  // 1. Connect to every higher tcp peer and say hello.
  for (int p = rank + 1; p < config_.size; ++p) {
    if (!links_[p]) continue;
    std::string key = fmt::format("{}/tcp/{}", config_.jobId, p);
    std::string where;
    try {
      where = kv.get(key, deadline);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
      fail(ErrorCode::kTimeout,
           "rank {}: tcp connect timed out waiting for peer {} to publish its address (key '{}')",
           rank, p, key);
    }
    size_t colon = where.rfind(':');
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    BRAID_ENFORCE(colon != std::string::npos &&
                      inet_pton(AF_INET, where.substr(0, colon).c_str(), &addr.sin_addr) == 1,
                  ErrorCode::kInvalidUsage, "rank {}: peer {} published a bad tcp address '{}'",
                  rank, p, where);
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(where.substr(colon + 1))));
    int fd = -1;
    std::string lastError = "no attempt";
    while (fd < 0) {
      BRAID_ENFORCE(!deadline.expired(), ErrorCode::kTimeout,
                    "rank {}: tcp connect to peer {} at {} timed out: {}", rank, p, where,
                    lastError);
      int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (s < 0) failErrno(fmt::format("rank {}: tcp socket() for peer {}", rank, p), errno);
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
    links_[p]->fd = fd;
    std::string hello = encodeHello(config_.size, rank, p, config_.jobId, config_.secret);
    BRAID_ENFORCE(writeAll(fd, hello.data(), hello.size(), deadline), ErrorCode::kRemoteError,
                  "rank {}: tcp handshake to peer {} at {} failed while sending", rank, p, where);
  }
  // 2. Accept every lower tcp peer.
  acceptPeers(deadline);
  // 3. Every higher peer acknowledges our hello.
  for (int p = rank + 1; p < config_.size; ++p) {
    if (!links_[p]) continue;
    Ack ack;
    bool ok = readAll(links_[p]->fd, reinterpret_cast<char*>(&ack), sizeof ack, deadline);
    BRAID_ENFORCE(ok && ack.magic == kAckMagic && ack.rank == p, ErrorCode::kRemoteError,
                  "rank {}: tcp handshake with peer {}: {}", rank, p,
                  deadline.expired() ? "timed out waiting for its acknowledgement"
                                     : "it closed the connection (secret/job/size mismatch?)");
  }
  for (auto& link : links_) {
    if (link) setNoDelay(link->fd);
  }
  close(listenFd_);  // every peer is here; later strays are refused by the kernel
  listenFd_ = -1;
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
  for (int p = 0; p < rank; ++p) missing += links_[p] ? 1 : 0;

  auto reject = [&](Pending& c, const std::string& why) {
    BRAID_WARN("rank {}: rejected a tcp connection from {}: {}", rank, c.from, why);
    close(c.fd);
    c.fd = -1;
  };

  while (missing > 0) {
    if (deadline.expired()) {
      std::string who;
      for (int p = 0; p < rank; ++p) {
        if (links_[p] && links_[p]->fd < 0) who += (who.empty() ? "" : ", ") + std::to_string(p);
      }
      for (auto& c : pending) close(c.fd);
      fail(ErrorCode::kTimeout, "rank {}: tcp connect timed out waiting for peer(s) {} to connect",
           rank, who);
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
        std::string why;
        if (h.magic != kHelloMagic) {
          why = "bad magic (not a braid peer)";
        } else if (h.version != kProtocolVersion) {
          why = fmt::format("protocol version {} (this rank speaks {})", h.version,
                            kProtocolVersion);
        } else if (h.size != config_.size) {
          why = fmt::format("world size {} (this job has {})", h.size, config_.size);
        } else if (h.target != rank) {
          why = fmt::format("it wants rank {}", h.target);
        } else if (h.rank < 0 || h.rank >= rank || !links_[h.rank]) {
          why = fmt::format("rank {} is not a tcp peer that connects to rank {}", h.rank, rank);
        } else if (links_[h.rank]->fd >= 0) {
          why = fmt::format("rank {} is already connected", h.rank);
        } else if (h.jobIdBytes > kMaxHandshakeString || h.secretBytes > kMaxHandshakeString) {
          why = "oversized job id or secret";
        }
        if (!why.empty()) {
          reject(c, why);
          continue;
        }
        c.haveHello = true;
        c.buf.resize(sizeof(Hello) + h.jobIdBytes + h.secretBytes);
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
      links_[c.hello.rank]->fd = c.fd;
      c.fd = -1;
      --missing;
    }
    std::erase_if(pending, [](const Pending& c) { return c.fd < 0; });
  }
  for (auto& c : pending) reject(c, "all peers were already connected");
}

void TcpTransport::start(Doorbell* doorbell) {
  doorbell_ = doorbell;
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epollFd_ < 0) failErrno(fmt::format("rank {}: epoll_create1", config_.rank), errno);
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (eventFd_ < 0) failErrno(fmt::format("rank {}: eventfd", config_.rank), errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = UINT64_MAX;
  epoll_ctl(epollFd_, EPOLL_CTL_ADD, eventFd_, &ev);
  for (auto& link : links_) {
    if (!link) continue;
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(link->rank);
    if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, link->fd, &ev) != 0) {
      failErrno(fmt::format("rank {}: epoll_ctl for peer {}", config_.rank, link->rank), errno);
    }
  }
  thread_ = std::thread([this] { progressLoop(); });
}

SendChannel& TcpTransport::send(int peer, int channel) {
  return *sends_[peer * config_.channels + channel];
}

RecvChannel& TcpTransport::recv(int peer, int channel) {
  return *recvs_[peer * config_.channels + channel];
}

bool TcpTransport::peerAlive(int peer) {
  return !links_[peer] || links_[peer]->alive.load(std::memory_order_acquire);
}

void TcpTransport::wakeProgress() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (progressSleeping_.load(std::memory_order_relaxed) != 0 && eventFd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(eventFd_, &one, sizeof one);
    (void)ignored;
  }
}

void TcpTransport::flushSoon(PeerLink& link) {
  // Writing from the user thread saves a wake-up of the progress thread per message; when the
  // progress thread is writing this link right now, it picks the new work up itself.
  if (!stopping_.load(std::memory_order_relaxed)) {
    std::unique_lock<std::mutex> lock(link.mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      flushOutLocked(link);
      return;
    }
  }
  wakeProgress();
}

void TcpTransport::signalAbort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abortReason_.empty()) abortReason_ = reason.empty() ? "aborted" : reason;
  }
  abortRequested_.store(true, std::memory_order_seq_cst);
  if (eventFd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(eventFd_, &one, sizeof one);
    (void)ignored;
  }
}

std::optional<std::pair<int, std::string>> TcpTransport::peerAbort() {
  std::lock_guard<std::mutex> lock(mutex_);
  return peerAbort_;
}

void TcpTransport::recordAbort(int peer, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!peerAbort_) peerAbort_ = std::make_pair(peer, reason);
}

void TcpTransport::markDead(PeerLink& link, const std::string& why, bool protocolError) {
  if (!link.alive.exchange(false)) return;  // the user thread may get here too (inline flush)
  if (protocolError) {
    std::string text = fmt::format("protocol error from rank {}: {}", link.rank, why);
    if (!stopping_.load()) BRAID_WARN("rank {}: {}", config_.rank, text);
    recordAbort(link.rank, text);
    shutdown(link.fd, SHUT_RDWR);
  } else if (!stopping_.load()) {
    BRAID_INFO("rank {}: tcp connection to peer {} lost: {}", config_.rank, link.rank, why);
  }
  epoll_ctl(epollFd_, EPOLL_CTL_DEL, link.fd, nullptr);
  if (doorbell_ != nullptr) ringDoorbell(*doorbell_);
}

bool TcpTransport::flushOut(PeerLink& link) {
  std::lock_guard<std::mutex> lock(link.mutex);
  return flushOutLocked(link);
}

bool TcpTransport::flushOutLocked(PeerLink& link) {
  if (!link.alive.load(std::memory_order_relaxed) || link.finSent) return false;
  const int channels = config_.channels;
  bool did = false;
  for (int c = 0; c < channels; ++c) {
    TcpRecvChannel& rc = *recvs_[link.rank * channels + c];
    uint64_t released = rc.released_.load(std::memory_order_acquire);
    if (released - rc.creditsSent_.load(std::memory_order_relaxed) >= rc.creditBatch_) {
      FrameHeader credit;
      credit.type = kCredit;
      credit.channel = static_cast<uint32_t>(c);
      credit.length = released;
      link.control.append(reinterpret_cast<const char*>(&credit), sizeof credit);
      rc.creditsSent_.store(released, std::memory_order_relaxed);
    }
  }
  bool blocked = false;
  while (!blocked) {
    if (!link.inFrame && link.controlOff < link.control.size()) {
      ssize_t n = ::send(link.fd, link.control.data() + link.controlOff,
                         link.control.size() - link.controlOff, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          blocked = true;
        } else if (errno != EINTR) {
          markDead(link, errnoText(errno), false);
          return true;
        }
        continue;
      }
      did = true;
      link.controlOff += static_cast<size_t>(n);
      if (link.controlOff == link.control.size()) {
        link.control.clear();
        link.controlOff = 0;
      }
      continue;
    }
    if (!link.inFrame) {
      for (int i = 0; i < channels && !link.inFrame; ++i) {
        int c = (link.nextChannel + i) % channels;
        TcpSendChannel& sc = *sends_[link.rank * channels + c];
        if (sc.posted_.load(std::memory_order_acquire) > sc.written_) {
          const SlotInfo& info = sc.info_[sc.written_ % sc.k_];
          link.frame.type = kData;
          link.frame.channel = static_cast<uint32_t>(c);
          link.frame.length = info.size;
          link.frame.meta = info.meta;
          link.frameChannel = c;
          link.frameOff = 0;
          link.inFrame = true;
        }
      }
      if (!link.inFrame) break;  // nothing to send
    }
    TcpSendChannel& sc = *sends_[link.rank * channels + link.frameChannel];
    size_t total = sizeof(FrameHeader) + link.frame.length;
    iovec iov[2];
    int count = 0;
    if (link.frameOff < sizeof(FrameHeader)) {
      iov[count++] = {reinterpret_cast<char*>(&link.frame) + link.frameOff,
                      sizeof(FrameHeader) - link.frameOff};
      if (link.frame.length > 0) iov[count++] = {sc.slot(sc.written_), link.frame.length};
    } else {
      size_t off = link.frameOff - sizeof(FrameHeader);
      iov[count++] = {sc.slot(sc.written_) + off, link.frame.length - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(link.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        blocked = true;
      } else if (errno != EINTR) {
        markDead(link, errnoText(errno), false);
        return true;
      }
      continue;
    }
    did = true;
    link.frameOff += static_cast<size_t>(n);
    if (link.frameOff == total) {
      ++sc.written_;
      link.inFrame = false;
      link.nextChannel = (link.frameChannel + 1) % channels;
    }
  }
  if (blocked != link.wantOut) {
    link.wantOut = blocked;
    epoll_event ev{};
    ev.events = EPOLLIN | (blocked ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.u64 = static_cast<uint64_t>(link.rank);
    epoll_ctl(epollFd_, EPOLL_CTL_MOD, link.fd, &ev);
  }
  return did;
}

bool TcpTransport::readIn(PeerLink& link) {
  const int channels = config_.channels;
  bool did = false;
  // Bounded so that one busy peer cannot starve the others.
  for (int round = 0; round < 64 && link.alive.load(std::memory_order_relaxed); ++round) {
    char* dst;
    size_t want;
    if (!link.inBody) {
      dst = reinterpret_cast<char*>(&link.inHeader) + link.inHeaderGot;
      want = sizeof(FrameHeader) - link.inHeaderGot;
    } else {
      dst = link.inDst + link.inBodyGot;
      want = link.inHeader.length - link.inBodyGot;
    }
    ssize_t n = ::recv(link.fd, dst, want, MSG_DONTWAIT);
    if (n == 0) {
      markDead(link, "closed by the peer", false);
      return true;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return did;
      markDead(link, errnoText(errno), false);
      return true;
    }
    did = true;
    const FrameHeader& h = link.inHeader;
    bool complete = false;
    if (!link.inBody) {
      link.inHeaderGot += static_cast<size_t>(n);
      if (link.inHeaderGot < sizeof(FrameHeader)) continue;
      link.inHeaderGot = 0;
      if (h.type != kData && h.type != kCredit && h.type != kAbort) {
        markDead(link, fmt::format("unknown frame type {}", h.type), true);
        return true;
      }
      if (h.type != kAbort && h.channel >= static_cast<uint32_t>(channels)) {
        markDead(link, fmt::format("frame for channel {} of {}", h.channel, channels), true);
        return true;
      }
      if (h.type == kCredit) {
        TcpSendChannel& sc = *sends_[link.rank * channels + h.channel];
        // posted_, not written_: the writer may not have counted the frame yet when the
        // credit for it is already back.
        uint64_t posted = sc.posted_.load(std::memory_order_acquire);
        if (h.length > posted || h.length < sc.credited_.load(std::memory_order_relaxed)) {
          markDead(link,
                   fmt::format("credit {} on channel {} outside [{}, {}]", h.length, h.channel,
                               sc.credited_.load(std::memory_order_relaxed), posted),
                   true);
          return true;
        }
        sc.credited_.store(h.length, std::memory_order_release);
        ringDoorbellIfSleeping(*doorbell_);
        continue;
      }
      if (h.type == kAbort) {
        if (h.length > kMaxAbortReason) {
          markDead(link, fmt::format("abort reason of {} bytes", h.length), true);
          return true;
        }
        link.reason.assign(h.length, '\0');
        link.inDst = link.reason.data();
      } else {
        TcpRecvChannel& rc = *recvs_[link.rank * channels + h.channel];
        if (h.length > rc.slotBytes_) {
          markDead(link,
                   fmt::format("frame of {} bytes on channel {} exceeds the slot size {}",
                               h.length, h.channel, rc.slotBytes_),
                   true);
          return true;
        }
        uint64_t arrived = rc.arrived_.load(std::memory_order_relaxed);
        if (arrived - rc.released_.load(std::memory_order_acquire) >= rc.k_) {
          markDead(link, fmt::format("more than {} messages in flight on channel {}", rc.k_,
                                     h.channel),
                   true);
          return true;
        }
        if (!rc.buffer_) rc.buffer_.reset(new char[rc.k_ * rc.slotBytes_]);
        link.inDst = rc.slot(arrived);
      }
      link.inBodyGot = 0;
      link.inBody = h.length > 0;
      complete = h.length == 0;
    } else {
      link.inBodyGot += static_cast<size_t>(n);
      complete = link.inBodyGot == h.length;
    }
    if (!complete) continue;
    link.inBody = false;
    if (h.type == kAbort) {
      recordAbort(link.rank, link.reason);
      ringDoorbell(*doorbell_);
    } else {
      TcpRecvChannel& rc = *recvs_[link.rank * channels + h.channel];
      uint64_t arrived = rc.arrived_.load(std::memory_order_relaxed);
      rc.info_[arrived % rc.k_] = {h.length, h.meta};
      rc.arrived_.store(arrived + 1, std::memory_order_release);
      ringDoorbellIfSleeping(*doorbell_);
    }
  }
  return did;
}

bool TcpTransport::hasLocalWork() {
  if (abortRequested_.load(std::memory_order_relaxed) && !abortQueued_) return true;
  const int channels = config_.channels;
  for (auto& link : links_) {
    if (!link || !link->alive.load(std::memory_order_relaxed)) continue;
    std::lock_guard<std::mutex> lock(link->mutex);
    if (link->finSent || link->wantOut) continue;  // nothing to write, or waits for EPOLLOUT
    if (link->inFrame || link->controlOff < link->control.size()) return true;
    for (int c = 0; c < channels; ++c) {
      TcpSendChannel& sc = *sends_[link->rank * channels + c];
      if (sc.posted_.load(std::memory_order_relaxed) > sc.written_) return true;
      TcpRecvChannel& rc = *recvs_[link->rank * channels + c];
      if (rc.released_.load(std::memory_order_relaxed) -
              rc.creditsSent_.load(std::memory_order_relaxed) >=
          rc.creditBatch_) {
        return true;
      }
    }
  }
  return false;
}

bool TcpTransport::hasPendingOutput() {
  const int channels = config_.channels;
  for (auto& link : links_) {
    if (!link || !link->alive.load(std::memory_order_relaxed)) continue;
    std::lock_guard<std::mutex> lock(link->mutex);
    if (link->finSent) continue;
    if (link->inFrame || link->controlOff < link->control.size()) return true;
    for (int c = 0; c < channels; ++c) {
      TcpSendChannel& sc = *sends_[link->rank * channels + c];
      if (sc.posted_.load(std::memory_order_acquire) > sc.written_) return true;
    }
  }
  return abortRequested_.load() && !abortQueued_;
}

bool TcpTransport::progressOnce() {
  bool did = false;
  if (abortRequested_.load(std::memory_order_acquire) && !abortQueued_) {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reason = abortReason_.substr(0, kMaxAbortReason);
    }
    FrameHeader frame;
    frame.type = kAbort;
    frame.length = reason.size();
    for (auto& link : links_) {
      if (!link) continue;
      std::lock_guard<std::mutex> lock(link->mutex);
      link->control.append(reinterpret_cast<const char*>(&frame), sizeof frame);
      link->control += reason;
    }
    abortQueued_ = true;
    did = true;
  }
  for (auto& link : links_) {
    if (link) did |= flushOut(*link);
  }
  return did;
}

void TcpTransport::progressLoop() {
  epoll_event events[64];
  int idle = 0;
  Clock::time_point drainUntil{};
  Clock::time_point lingerUntil{};
  bool lingering = false;
  while (true) {
    bool stop = stopping_.load(std::memory_order_acquire);
    if (stop) {
      auto now = Clock::now();
      if (drainUntil == Clock::time_point{}) {
        drainUntil = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(kDrainSeconds));
      }
      if (!lingering && (!hasPendingOutput() || now >= drainUntil)) {
        // Everything posted is in the socket: half-close, then wait (bounded) until the peers
        // have it, so that unread incoming data cannot turn our close into a reset that
        // discards our unsent tail.
        for (auto& link : links_) {
          if (link && link->alive.load()) {
            std::lock_guard<std::mutex> lock(link->mutex);
            shutdown(link->fd, SHUT_WR);
            link->finSent = true;
          }
        }
        lingering = true;
        lingerUntil = now + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(kLingerSeconds));
      }
      if (lingering) {
        // Done once the peers acknowledged every byte we sent: a reset after that no longer
        // loses anything (it purges our send queue, not the data in their receive queue).
        bool unacked = false;
        for (auto& link : links_) {
          int outq = 0;
          if (link && link->alive.load() && ioctl(link->fd, SIOCOUTQ, &outq) == 0 && outq > 0) {
            unacked = true;
          }
        }
        if (!unacked || now >= lingerUntil) break;
      }
    }
    int timeout = 0;
    if (idle >= kSpinPolls) {
      progressSleeping_.store(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // Dekker with wakeProgress()
      if (!hasLocalWork() && !stopping_.load()) timeout = kSleepMillis;
      if (stop) timeout = 10;
    }
    int n = epoll_wait(epollFd_, events, 64, timeout);
    progressSleeping_.store(0, std::memory_order_relaxed);
    bool did = false;
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == UINT64_MAX) {
        uint64_t value;
        while (read(eventFd_, &value, sizeof value) > 0) {
        }
        continue;
      }
      PeerLink& link = *links_[id];
      if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (lingering) {
          // Draining: discard whatever still arrives, just notice the close.
          char sink[4096];
          ssize_t got = ::recv(link.fd, sink, sizeof sink, MSG_DONTWAIT);
          if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
            markDead(link, "closed", false);
          }
          did = true;
        } else {
          did |= readIn(link);
        }
      }
      if ((events[i].events & EPOLLOUT) && link.alive.load()) {
        did |= flushOut(link);  // also drops EPOLLOUT once the socket takes everything
      }
    }
    if (!lingering) did |= progressOnce();
    idle = did ? 0 : idle + 1;
  }
}

}  // namespace braid::transport::tcp
