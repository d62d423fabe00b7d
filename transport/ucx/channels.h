// Internal to the ucx transport: per-peer state and the channel objects, shared by ucx.cc (setup,
// user-thread calls) and progress.cc (the progress thread and the UCX callbacks).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "transport/ucx/ucx.h"
#include "transport/ucx/wire.h"

namespace braid::transport::ucx {

/// One peer's endpoint (net::ChannelPeer: liveness, hello; checkPid: UCX does not report its
/// failures, but peerAlive() may ask the kernel). `alive` is read by any thread; the rest
/// belongs to the worker's owner.
struct PeerState : net::ChannelPeer {
  UcxTransport* owner = nullptr;
  ucp_ep_h ep = nullptr;
  bool peerErrors = true;  // UCP_ERR_HANDLING_MODE_PEER: UCX reports its failure
};

/// An active message in flight (header and payload must outlive the send).
struct ControlMessage {
  UcxTransport* owner = nullptr;
  PeerState* peer = nullptr;
  ControlHeader header;
  std::string payload;
};

/// Per-slot state of a send channel; the user data of its send requests.
struct SendSlot {
  UcxSendChannel* channel = nullptr;
  /// 1 while a send from this slot is in flight (set and cleared by the worker's owner).
  std::atomic<uint8_t> busy{0};
};

/// Per-slot state of a receive channel; the user data of its receive requests.
struct RecvSlot {
  UcxRecvChannel* channel = nullptr;
  uint32_t index = 0;
  void* request = nullptr;  // the posted receive, until it completes
  bool done = false;        // completed, not yet counted in arrived_
};

}  // namespace braid::transport::ucx
