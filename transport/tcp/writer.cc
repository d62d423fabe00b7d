// tcp's sending half of net.h, mutex_ held: isend queues a data frame (FrameHeader from the slot's
// SlotHeader, then the payload, straight from the slot), credit and control queue a credit or
// an abort frame; each writes the socket at once, as far as it takes it, and leaves the rest to
// EPOLLOUT (reader.cc's test). Control frames go between data frames, data frames in the order
// they were issued; a data frame all in the socket completes its send (ChannelEndpoint::sent).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include "common/log.h"
#include "transport/tcp/channels.h"
#include "transport/tcp/tcp.h"

namespace braid::transport::tcp {

namespace {

// A send that wrote nothing (it returned -1): true when the socket is only full (*blocked set) or
// the call was interrupted; false when the connection failed.
bool sendStalled(bool* blocked) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    *blocked = true;
    return true;
  }
  return errno == EINTR;
}

}  // namespace

net::Issue TcpTransport::isend(TcpSendChannel& channel, uint64_t n) {
  PeerState& peer = *channel.peerState_;
  channel.slots_[n % channel.k_].busy.store(1, std::memory_order_relaxed);
  peer.queue.push_back({&channel, n});
  writeOut(peer);
  return net::Issue::kDone;
}

net::Issue TcpTransport::credit(PeerState& peer, int channel, uint64_t count) {
  FrameHeader frame;
  frame.type = kCredit;
  frame.channel = static_cast<uint32_t>(channel);
  frame.length = count;
  queueControl(peer, frame, {});
  return net::Issue::kDone;
}

net::Issue TcpTransport::control(PeerState& peer, net::ControlType type,
                                 const std::string& payload) {
  if (type != net::kAbort) return net::Issue::kDone;
  FrameHeader frame;
  frame.type = kAbort;
  frame.length = payload.size();
  queueControl(peer, frame, payload);
  return net::Issue::kDone;
}

void TcpTransport::queueControl(PeerState& peer, const FrameHeader& header,
                                const std::string& payload) {
  peer.control.append(reinterpret_cast<const char*>(&header), sizeof header);
  peer.control += payload;
  writeOut(peer);
}

void TcpTransport::outputFailed(PeerState& peer, int err, size_t bytes) {
  // The reader decides when the peer is dead: it still holds what the peer sent before it closed
  // (the peer may have finished and left), and it sees the close or reset right after that.
  peer.sendFailed = true;
  BRAID_TRACE(
      "rank {}: tcp send of {} bytes to peer rank {} failed: {}; reading what it sent until the "
      "end",
      config_.rank, bytes, peer.rank, errnoText(err));
}

bool TcpTransport::writeOut(PeerState& peer) {
  if (!peer.alive.load(std::memory_order_relaxed) || peer.finSent || peer.sendFailed) return false;
  bool did = false;
  bool blocked = false;
  while (!blocked) {
    if (!peer.inFrame && peer.controlOff < peer.control.size()) {
      const size_t left = peer.control.size() - peer.controlOff;
      ssize_t n = ::send(peer.fd, peer.control.data() + peer.controlOff, left,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (sendStalled(&blocked)) continue;
        outputFailed(peer, errno, left);
        return true;
      }
      did = true;
      peer.controlOff += static_cast<size_t>(n);
      if (peer.controlOff == peer.control.size()) {
        peer.control.clear();
        peer.controlOff = 0;
      }
      continue;
    }
    if (peer.queue.empty()) break;  // nothing to send
    TcpSendChannel& sc = *peer.queue.front().channel;
    const uint64_t number = peer.queue.front().n;
    char* slot = sc.slot(number);
    if (!peer.inFrame) {
      const auto* header = reinterpret_cast<const net::SlotHeader*>(slot);
      peer.frame.type = kData;
      peer.frame.channel = static_cast<uint32_t>(sc.channel_);
      peer.frame.length = header->bytes;
      peer.frame.meta = header->meta;
      peer.frameOff = 0;
      peer.inFrame = true;
    }
    char* payload = slot + net::kSlotHeaderBytes;
    const size_t total = sizeof(FrameHeader) + peer.frame.length;
    iovec iov[2];
    int count = 0;
    if (peer.frameOff < sizeof(FrameHeader)) {
      iov[count++] = {reinterpret_cast<char*>(&peer.frame) + peer.frameOff,
                      sizeof(FrameHeader) - peer.frameOff};
      if (peer.frame.length > 0) iov[count++] = {payload, peer.frame.length};
    } else {
      const size_t off = peer.frameOff - sizeof(FrameHeader);
      iov[count++] = {payload + off, peer.frame.length - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(peer.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (sendStalled(&blocked)) continue;
      outputFailed(peer, errno, total - peer.frameOff);
      return true;
    }
    did = true;
    peer.frameOff += static_cast<size_t>(n);
    if (peer.frameOff == total) {
      peer.inFrame = false;
      peer.queue.pop_front();
      sent(sc.slots_[number % sc.k_]);
    }
  }
  if (blocked != peer.wantOut && epollFd_ >= 0) {
    peer.wantOut = blocked;
    epoll_event ev{};
    ev.events = EPOLLIN | (blocked ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.u64 = static_cast<uint64_t>(peer.rank);
    epoll_ctl(epollFd_, EPOLL_CTL_MOD, peer.fd, &ev);
  }
  return did;
}

}  // namespace braid::transport::tcp
