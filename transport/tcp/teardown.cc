// Destroying a tcp endpoint, after the progress thread stopped: what was posted goes into the
// sockets while the peers take it (ChannelEndpoint::awaitSends, a DrainBudget), then every socket
// is half-closed and the endpoint lingers (another DrainBudget) until the peers acknowledged
// every byte, so that unread incoming data cannot turn the close into a reset that discards the
// unsent tail. A reset after the acks no longer loses anything (it purges our send queue, not
// the data in their receive queue).
#include <linux/sockios.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>

#include "transport/network/drain_budget.h"
#include "transport/tcp/channels.h"
#include "transport/tcp/tcp.h"

namespace braid::transport::tcp {

namespace {

constexpr int kLingerPollMillis = 10;  // a look at the acks at least this often

}  // namespace

void TcpTransport::closeConnections() {
  if (!connected_ || epollFd_ < 0) return;
  awaitSends(Teardown::kFlushSeconds);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& peer : peers_) {
    if (peer && peer->alive.load()) {
      shutdown(peer->fd, SHUT_WR);
      peer->finSent = true;
      epoll_event ev{};  // input only from here on (nothing is written any more)
      ev.events = EPOLLIN;
      ev.data.u64 = static_cast<uint64_t>(peer->rank);
      epoll_ctl(epollFd_, EPOLL_CTL_MOD, peer->fd, &ev);
    }
  }
  DrainBudget linger(Teardown::kLingerSeconds, drainLimit());
  long before = -1;
  while (true) {
    long unacked = 0;
    for (auto& peer : peers_) {
      int outq = 0;
      if (peer && peer->alive.load() && ioctl(peer->fd, SIOCOUTQ, &outq) == 0 && outq > 0) {
        unacked += outq;
      }
    }
    if (unacked == 0 || linger.expired()) return;
    if (before >= 0 && unacked < before) linger.progressed();
    before = unacked;
    discardInput(kLingerPollMillis);
  }
}

void TcpTransport::discardInput(int timeoutMillis) {
  epoll_event events[16];
  const int n = epoll_wait(epollFd_, events, 16, timeoutMillis);
  for (int i = 0; i < n; ++i) {
    PeerState& peer = *peers_[events[i].data.u64];
    char sink[4096];
    ssize_t got = ::recv(peer.fd, sink, sizeof sink, MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
      markDead(peer, "closed", false);
    }
  }
}

}  // namespace braid::transport::tcp
