// The tcp progress thread: writes posted slots and credits, reads frames into the receivers'
// slots, rings the doorbell, and on destruction drains, half-closes and waits (bounded) for the
// peers' acknowledgement before the sockets close.
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"
#include "transport/tcp/channels.h"
#include "transport/tcp/tcp.h"

namespace braid::transport::tcp {

namespace {

// A send that wrote nothing (it returned -1): true when the socket is only full (*blocked set) or
// the call was interrupted; false when the link failed.
bool sendStalled(bool* blocked) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    *blocked = true;
    return true;
  }
  return errno == EINTR;
}

}  // namespace

bool TcpTransport::flushOut(PeerLink& link) {
  std::lock_guard<std::mutex> lock(link.mutex);
  return flushOutLocked(link);
}

void TcpTransport::outputFailed(PeerLink& link, int err) {
  // The reader decides when the link is dead: it still holds what the peer sent before it closed
  // (the peer may have finished and left), and it sees the close or reset right after that.
  link.sendFailed = true;
  BRAID_TRACE("rank {}: tcp send to peer rank {} failed: {}; reading what it sent until the end",
              config_.rank, link.rank, errnoText(err));
  wakeProgress();
}

bool TcpTransport::flushOutLocked(PeerLink& link) {
  if (!link.alive.load(std::memory_order_relaxed) || link.finSent || link.sendFailed) return false;
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
        if (sendStalled(&blocked)) continue;
        outputFailed(link, errno);
        return true;
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
      if (sendStalled(&blocked)) continue;
      outputFailed(link, errno);
      return true;
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
      if (std::string why = headerError(h, channels); !why.empty()) {
        markDead(link, why, true);
        return true;
      }
      if (h.type == kCredit) {
        TcpSendChannel& sc = *sends_[link.rank * channels + h.channel];
        // posted_, not written_: the writer may not have counted the frame yet when the
        // credit for it is already back.
        std::string why = creditError(h, sc.credited_.load(std::memory_order_relaxed),
                                      sc.posted_.load(std::memory_order_acquire));
        if (!why.empty()) {
          markDead(link, why, true);
          return true;
        }
        sc.credited_.store(h.length, std::memory_order_release);
        ringDoorbellIfSleeping();
        continue;
      }
      if (h.type == kAbort) {
        link.reason.assign(h.length, '\0');
        link.inDst = link.reason.data();
      } else {
        TcpRecvChannel& rc = *recvs_[link.rank * channels + h.channel];
        uint64_t arrived = rc.arrived_.load(std::memory_order_relaxed);
        std::string why = dataError(h, rc.slotBytes_, rc.k_,
                                    arrived - rc.released_.load(std::memory_order_acquire));
        if (!why.empty()) {
          markDead(link, why, true);
          return true;
        }
        rc.allocate();
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
      ringDoorbell();
    } else {
      TcpRecvChannel& rc = *recvs_[link.rank * channels + h.channel];
      uint64_t arrived = rc.arrived_.load(std::memory_order_relaxed);
      rc.info_[arrived % rc.k_] = {h.length, h.meta};
      rc.arrived_.store(arrived + 1, std::memory_order_release);
      ringDoorbellIfSleeping();
    }
  }
  return did;
}

bool TcpTransport::hasLocalWork() {
  if (ownAbortPending()) return true;
  const int channels = config_.channels;
  for (auto& link : links_) {
    if (!link || !link->alive.load(std::memory_order_relaxed)) continue;
    std::lock_guard<std::mutex> lock(link->mutex);
    // Nothing to write, or it waits for EPOLLOUT.
    if (link->finSent || link->sendFailed || link->wantOut) continue;
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
    if (link->finSent || link->sendFailed) continue;
    if (link->inFrame || link->controlOff < link->control.size()) return true;
    for (int c = 0; c < channels; ++c) {
      TcpSendChannel& sc = *sends_[link->rank * channels + c];
      if (sc.posted_.load(std::memory_order_acquire) > sc.written_) return true;
    }
  }
  return ownAbortPending(std::memory_order_seq_cst);
}

void TcpTransport::waitForEvents(int timeoutMillis) {
  // Also at 0: the ready sockets are collected here and handled by progress().
  eventCount_ = epoll_wait(epollFd_, events_, 64, timeoutMillis);
}

void TcpTransport::discardIn(PeerLink& link) {
  char sink[4096];
  ssize_t got = ::recv(link.fd, sink, sizeof sink, MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) markDead(link, "closed", false);
}

bool TcpTransport::progress() {
  const bool lingering = teardown_ && teardown_->linger;
  bool did = false;
  for (int i = 0; i < eventCount_; ++i) {
    uint64_t id = events_[i].data.u64;
    if (id == UINT64_MAX) {
      wake_.drain();
      continue;
    }
    PeerLink& link = *links_[id];
    if (events_[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      if (lingering) {
        discardIn(link);  // half-closed: just notice the peer's close
        did = true;
      } else {
        did |= readIn(link);
      }
    }
    if ((events_[i].events & EPOLLOUT) && link.alive.load()) {
      did |= flushOut(link);  // also drops EPOLLOUT once the socket takes everything
    }
  }
  eventCount_ = 0;
  if (lingering) return did;
  if (std::optional<std::string> reason = takeOwnAbort(kMaxAbortReason)) {
    FrameHeader frame;
    frame.type = kAbort;
    frame.length = reason->size();
    for (auto& link : links_) {
      if (!link) continue;
      std::lock_guard<std::mutex> lock(link->mutex);
      link->control.append(reinterpret_cast<const char*>(&frame), sizeof frame);
      link->control += *reason;
    }
    did = true;
  }
  for (auto& link : links_) {
    if (link) did |= flushOut(*link);
  }
  return did;
}

bool TcpTransport::finishStopping(bool lastRoundDid) {
  if (!teardown_) {
    teardown_.emplace(drainLimit());
  } else if (lastRoundDid && !teardown_->linger) {
    teardown_->flush.progressed();  // the peers take data: keep writing
  }
  Teardown& t = *teardown_;
  if (!t.linger && (!hasPendingOutput() || t.flush.expired())) {
    // Everything posted is in the socket: half-close, then wait (bounded) until the peers have
    // it, so that unread incoming data cannot turn our close into a reset that discards our
    // unsent tail.
    for (auto& link : links_) {
      if (link && link->alive.load()) {
        std::lock_guard<std::mutex> lock(link->mutex);
        shutdown(link->fd, SHUT_WR);
        link->finSent = true;
      }
    }
    t.linger.emplace(Teardown::kLingerSeconds, t.limit);
  }
  if (!t.linger) return false;
  // Done once the peers acknowledged every byte we sent: a reset after that no longer loses
  // anything (it purges our send queue, not the data in their receive queue).
  long unacked = 0;
  for (auto& link : links_) {
    int outq = 0;
    if (link && link->alive.load() && ioctl(link->fd, SIOCOUTQ, &outq) == 0 && outq > 0) {
      unacked += outq;
    }
  }
  if (t.unackedBefore >= 0 && unacked < t.unackedBefore) t.linger->progressed();
  t.unackedBefore = unacked;
  return unacked == 0 || t.linger->expired();
}

}  // namespace braid::transport::tcp
