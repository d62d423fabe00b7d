// The tcp transport. One connection per peer pair (the lower rank connects), all channel indices
// multiplexed on it as frames (transport/tcp/wire.h), driven by ChannelEndpoint like ucx, ofi and
// verbs: a post or a release runs the pump on the user's thread, which writes the posted slot as a
// kData frame (or a kCredit frame: the cumulative released count) into the socket at once; the
// progress thread (or a user thread that finds nothing) reads the ready sockets, copying kData
// frames straight into the receiver's K slots of the channel, and rings the endpoint's doorbell
// on every arrival, credit, abort and connection loss. A sender has at most K messages not yet
// released by the receiver per channel. This file: setup and the hooks; connect.cc: the
// handshake; writer.cc and reader.cc: net.h's calls; teardown.cc: the destroy.
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

constexpr int kSpinPolls = 0;  // as ofi and verbs: users read the sockets themselves (pollSoon)
constexpr int kStopSleepMillis = 10;  // its sleep while stopping

}  // namespace

TcpTransport::TcpTransport(const EndpointConfig& config, KeyValue& kv)
    : TcpBase(config, kName, SpinPolicy{kSpinPolls, {}}, kStopSleepMillis) {
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
  try {
    for (int p = 0; p < config.size; ++p) {
      if (p == rank || config.peerKinds[p] != Kind::kTcp) continue;
      peers_[p] = std::make_unique<PeerState>();
      peers_[p]->rank = p;
      trackPeer(peers_[p].get());
    }
    addChannels();
    kv.set(fmt::format("{}/tcp/{}", config.jobId, rank),
           fmt::format("{}:{}", host, ntohs(addr.sin_port)));
  } catch (...) {
    close(listenFd_);  // the destructor does not run for a throwing constructor
    throw;
  }
}

TcpTransport::~TcpTransport() {
  stopProgressThread();  // its last round issues what was posted (finishStopping)
  closeConnections();    // delivers it (bounded), half-closes, lingers for the acks
  for (auto& peer : peers_) {
    if (peer && peer->fd >= 0) close(peer->fd);
  }
  if (listenFd_ >= 0) close(listenFd_);
  if (epollFd_ >= 0) close(epollFd_);
}

void TcpTransport::startNetwork() {
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epollFd_ < 0) failErrno(fmt::format("rank {}: epoll_create1", config_.rank), errno);
  for (auto& peer : peers_) {
    if (!peer) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(peer->rank);
    if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, peer->fd, &ev) != 0) {
      failErrno(fmt::format("rank {}: epoll_ctl for peer rank {}", config_.rank, peer->rank),
                errno);
    }
  }
}

void TcpTransport::pollSoon() {
  // While the progress thread runs it reads the sockets anyway: a second reader only contends
  // for the mutex and burns the cores the peers need (as ucx). While it sleeps, a waiting user
  // takes an arrival without a thread switch.
  if (!wake_.sleeping()) return;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) test(1);
}

void TcpTransport::peerDied(NetworkPeer& peer, bool protocolError) {
  auto& state = static_cast<PeerState&>(peer);
  if (protocolError) shutdown(state.fd, SHUT_RDWR);
  if (epollFd_ >= 0) epoll_ctl(epollFd_, EPOLL_CTL_DEL, state.fd, nullptr);
}

}  // namespace braid::transport::tcp
