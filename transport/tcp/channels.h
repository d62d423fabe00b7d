// Internal to the tcp transport: per-peer connection state and per-slot state, shared by tcp.cc
// (setup), connect.cc (handshake), writer.cc and reader.cc (net.h's calls over the socket) and
// teardown.cc. The channels are tagged_channels.h's (ChannelEndpoint's).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>

#include "transport/network/tagged_channels.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/wire.h"

namespace braid::transport::tcp {

/// strerror_r as a std::string.
inline std::string errnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof buf);
}

struct SendSlot {
  TcpSendChannel* channel = nullptr;
  /// 1 from isend until its frame is all in the socket (mutex_'s holder; read by tryAcquire).
  std::atomic<uint8_t> busy{0};
};

struct RecvSlot {
  TcpRecvChannel* channel = nullptr;
  uint32_t index = 0;
  bool done = false;  // landed, not yet counted in arrived_ (tcp: always in order)
};

/// One peer's connection (net::ChannelPeer: liveness). Everything but `alive` belongs to
/// mutex_'s holder (ChannelEndpoint's: the progress thread or a user thread that posts,
/// releases or polls).
struct PeerState : net::ChannelPeer {
  int fd = -1;
  // Output: frames issued (isend, credit, control) and not yet all in the socket.
  bool finSent = false;  // half-closed (teardown)
  // A send failed (the peer closed or reset): nothing more is written, but the peer stays alive
  // until the reader has taken in what it sent before and then sees the end, so that a peer that
  // posted its last messages and left is still heard in full.
  bool sendFailed = false;
  bool wantOut = false;  // EPOLLOUT registered: the socket buffer was full
  std::string control;   // credit and abort frames, written between data frames
  size_t controlOff = 0;
  struct Outgoing {
    TcpSendChannel* channel;
    uint64_t n;  // message number on the channel
  };
  std::deque<Outgoing> queue;  // data frames issued, in order; the front may be half written
  FrameHeader frame;           // the front's header, once started
  size_t frameOff = 0;         // bytes of the front written (header + payload)
  bool inFrame = false;
  // Input: the frame being read.
  FrameHeader inHeader;
  size_t inHeaderGot = 0;
  bool inBody = false;
  char* inDst = nullptr;
  size_t inBodyGot = 0;
  std::string abortText;
};

}  // namespace braid::transport::tcp
