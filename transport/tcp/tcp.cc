// The tcp transport. One connection per peer pair (the lower rank connects), all channel indices
// multiplexed on it as frames (transport/tcp/wire.h). A progress thread per endpoint polls every
// socket (epoll, non-blocking I/O): it writes posted send slots as kData frames, reads kData frames
// straight into the receiver's K slots of the channel, and returns kCredit frames (cumulative
// released count) as the user releases slots; a sender has at most K messages not yet released
// by the receiver per channel. It rings the endpoint's doorbell on every arrival, credit, abort
// and connection loss. User threads wake it through an eventfd only when it announced a sleep
// (the doorbell's Dekker protocol again); post() and release() write their frame from the calling
// thread when nobody else is writing that socket, so a message costs no thread switch on the
// sending side. This file: setup and the calls user threads make; connect.cc: the handshake;
// progress.cc: the progress thread.
#include "transport/tcp/tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"
#include "transport/tcp/channels.h"

namespace braid::transport::tcp {

namespace {

constexpr int kSpinPolls = 100;       // empty rounds before the progress thread sleeps
constexpr int kStopSleepMillis = 10;  // its sleep while flushing on destroy

}  // namespace

TcpTransport::TcpTransport(const EndpointConfig& config, KeyValue& kv)
    : NetworkEndpoint(config, "tcp", SpinPolicy{kSpinPolls, {}}, kStopSleepMillis),
      links_(config.size) {
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
    trackPeer(links_[p].get());
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
  stopProgressThread();  // flushes what was posted first (finishStopping)
  for (auto& link : links_) {
    if (link && link->fd >= 0) close(link->fd);
  }
  if (listenFd_ >= 0) close(listenFd_);
  if (epollFd_ >= 0) close(epollFd_);
}

void TcpTransport::startNetwork() {
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epollFd_ < 0) failErrno(fmt::format("rank {}: epoll_create1", config_.rank), errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = UINT64_MAX;
  epoll_ctl(epollFd_, EPOLL_CTL_ADD, wake_.fd(), &ev);
  for (auto& link : links_) {
    if (!link) continue;
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(link->rank);
    if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, link->fd, &ev) != 0) {
      failErrno(fmt::format("rank {}: epoll_ctl for peer rank {}", config_.rank, link->rank),
                errno);
    }
  }
}

SendChannel& TcpTransport::send(int peer, int channel) {
  return *sends_[peer * config_.channels + channel];
}

RecvChannel& TcpTransport::recv(int peer, int channel) {
  return *recvs_[peer * config_.channels + channel];
}

void TcpTransport::flushSoon(PeerLink& link) {
  // Writing from the user thread saves a wake-up of the progress thread per message; when the
  // progress thread is writing this link right now, it picks the new work up itself.
  if (!stopping()) {
    std::unique_lock<std::mutex> lock(link.mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      flushOutLocked(link);
      return;
    }
  }
  wakeProgress();
}

void TcpTransport::peerDied(NetworkPeer& peer, bool protocolError) {
  auto& link = static_cast<PeerLink&>(peer);
  if (protocolError) shutdown(link.fd, SHUT_RDWR);
  epoll_ctl(epollFd_, EPOLL_CTL_DEL, link.fd, nullptr);
}

}  // namespace braid::transport::tcp
