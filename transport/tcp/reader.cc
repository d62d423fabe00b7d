// tcp's receiving half of net.h, mutex_ held: test reads the ready sockets (epoll, level
// triggered, non-blocking) and writes those that have room again (EPOLLOUT); a kData frame goes
// straight into the receive slot of its channel's next message (the peer writes the slot: the
// receiver's slot header is filled from the frame header) and is handed to ChannelEndpoint
// (onArrived), a kCredit frame likewise (onCredit), a kAbort frame's reason too (onAbort). EOF or
// an error on the socket marks the peer dead, naming the cause. The sleep is a poll on the epoll
// fd and the wake-up fd.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "transport/tcp/channels.h"
#include "transport/tcp/tcp.h"

namespace braid::transport::tcp {

namespace {

constexpr int kEvents = 64;      // events per epoll_wait
constexpr int kReadsPerPeer = 64;  // per call, so that one busy peer cannot starve the others

}  // namespace

bool TcpTransport::test(int rounds) {
  if (epollFd_ < 0) return false;
  bool did = false;
  epoll_event events[kEvents];
  for (int r = 0; r < rounds; ++r) {
    const int n = epoll_wait(epollFd_, events, kEvents, 0);
    bool round = false;
    for (int i = 0; i < n; ++i) {
      PeerState& peer = *peers_[events[i].data.u64];
      if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) round |= readIn(peer);
      if ((events[i].events & EPOLLOUT) && peer.alive.load(std::memory_order_relaxed)) {
        round |= writeOut(peer);  // also drops EPOLLOUT once the socket takes everything
      }
    }
    did |= round;
    if (!round) break;
  }
  return did;
}

bool TcpTransport::readIn(PeerState& peer) {
  bool did = false;
  for (int round = 0; round < kReadsPerPeer && peer.alive.load(std::memory_order_relaxed);
       ++round) {
    char* dst;
    size_t want;
    if (!peer.inBody) {
      dst = reinterpret_cast<char*>(&peer.inHeader) + peer.inHeaderGot;
      want = sizeof(FrameHeader) - peer.inHeaderGot;
    } else {
      dst = peer.inDst + peer.inBodyGot;
      want = peer.inHeader.length - peer.inBodyGot;
    }
    ssize_t n = ::recv(peer.fd, dst, want, MSG_DONTWAIT);
    if (n == 0) {
      markDead(peer, "closed by the peer", false);
      return true;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return did;
      markDead(peer, fmt::format("reading {} bytes from it: {}", want, errnoText(errno)), false);
      return true;
    }
    did = true;
    bool complete = false;
    if (!peer.inBody) {
      peer.inHeaderGot += static_cast<size_t>(n);
      if (peer.inHeaderGot < sizeof(FrameHeader)) continue;
      peer.inHeaderGot = 0;
      if (!headerArrived(peer)) return true;
      peer.inBodyGot = 0;
      peer.inBody = peer.inHeader.length > 0 && peer.inHeader.type != kCredit;
      complete = !peer.inBody;
    } else {
      peer.inBodyGot += static_cast<size_t>(n);
      complete = peer.inBodyGot == peer.inHeader.length;
    }
    if (!complete) continue;
    peer.inBody = false;
    frameArrived(peer, peer.inHeader);
  }
  return did;
}

bool TcpTransport::headerArrived(PeerState& peer) {
  const FrameHeader& h = peer.inHeader;
  if (std::string why = headerError(h, config_.channels); !why.empty()) {
    markDead(peer, why, true);
    return false;
  }
  if (h.type == kAbort) {
    peer.abortText.assign(h.length, '\0');
    peer.inDst = peer.abortText.data();
  } else if (h.type == kData) {
    TcpRecvChannel& rc = *recvs_[index(peer.rank, static_cast<int>(h.channel))];
    const uint64_t arrived = rc.arrived_.load(std::memory_order_relaxed);
    std::string why = dataError(h, rc.slotBytes_, rc.k_,
                                arrived - rc.released_.load(std::memory_order_acquire));
    if (!why.empty()) {
      markDead(peer, why, true);
      return false;
    }
    peer.inDst = rc.slot(arrived) + net::kSlotHeaderBytes;
  }
  return true;
}

void TcpTransport::frameArrived(PeerState& peer, const FrameHeader& h) {
  switch (h.type) {
    case kCredit:
      onCredit(peer, h.channel, h.length);
      return;
    case kAbort:
      onAbort(peer, peer.abortText);
      return;
    default: {
      TcpRecvChannel& rc = *recvs_[index(peer.rank, static_cast<int>(h.channel))];
      const uint64_t arrived = rc.arrived_.load(std::memory_order_relaxed);
      auto* header = reinterpret_cast<net::SlotHeader*>(rc.slot(arrived));
      header->meta = h.meta;
      header->bytes = h.length;
      header->seq = arrived;
      onArrived(rc, static_cast<uint32_t>(arrived % rc.k_), net::kSlotHeaderBytes + h.length);
    }
  }
}

void TcpTransport::sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  // An epoll fd is readable while any of its sockets is ready: level triggered, so test() finds
  // them again.
  pollfd fds[2] = {{wake_.fd(), POLLIN, 0}, {epollFd_, POLLIN, 0}};
  if (poll(fds, 2, timeoutMillis) > 0 && (fds[0].revents & POLLIN)) wake_.drain();
}

size_t TcpTransport::sendsInFlight() const {
  size_t busy = 0;
  for (const auto& peer : peers_) {
    if (!peer || !peer->alive.load(std::memory_order_relaxed) || peer->sendFailed) continue;
    busy += peer->queue.size() + (peer->controlOff < peer->control.size() ? 1 : 0);
  }
  for (const auto& sc : sends_) {
    if (sc && sc->peerState_->alive.load(std::memory_order_relaxed)) {
      busy += sc->posted_.load(std::memory_order_relaxed) - sc->issued_;
    }
  }
  return busy;
}

}  // namespace braid::transport::tcp
